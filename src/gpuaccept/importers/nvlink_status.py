"""`nvidia-smi nvlink -s` (`--status`): each GPU's links, up at their speed or `<inactive>`.

A GPU whose links are all down prints one NVML line instead of its links; people shorten long
listings with `[...]`, and then the links left out are unknown, never assumed up. Error-counter
listings (`nvlink -e`, `Link 0: Replay Errors: 0`) share the layout and are not link states.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gpuaccept.importers.text import MAX_GPU_INDEX, Finding, TextFile

_GPU = re.compile(r"^\s*GPU (\d+): (.+?)\s*\(UUID: ([^)]*)\)\s*$")
_LINK = re.compile(r"^\s*Link (\d+):\s*(.+?)\s*$")
_SPEED = re.compile(r"^(\d+(?:\.\d+)?) GB/s$")
_ALL_DOWN = re.compile(r"NVML: Unable to retrieve NVLink information as all links are inActive", re.IGNORECASE)
_ELIDED = re.compile(r"^\s*(\[\s*(\.\.\.|…)\s*\]|\.\.\.|…)\s*$")
KIND = "nvidia-smi nvlink -s"


@dataclass
class GpuLinks:
    index: int
    name: str
    uuid: str
    line: int
    links: list[tuple[int, bool, float | None]] = field(default_factory=list)  # (link, up, GB/s)
    all_down: bool = False  # NVML said every link is inactive, without listing them
    elided: bool = False  # the listing leaves links out


@dataclass
class NvLinkStatus:
    file: str
    line: int
    gpus: dict[int, GpuLinks] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)

    def describe(self) -> str:
        return f"{KIND} ({len(self.gpus)} GPUs)"


def find_nvlink_status(text: TextFile) -> list[NvLinkStatus]:
    status = NvLinkStatus(text.name, 0)
    current: GpuLinks | None = None
    for line in text.lines:
        gpu = _GPU.match(line.text)
        if gpu and int(gpu.group(1)) > MAX_GPU_INDEX:
            status.findings.append(Finding(text.name, line.number, f"GPU {gpu.group(1)} is beyond any machine (GPU indices "
                                           f"stop at {MAX_GPU_INDEX} here): a damaged line; its links are not used"))
            current = None
            continue
        if gpu:
            current = GpuLinks(int(gpu.group(1)), gpu.group(2).strip(), gpu.group(3).strip(), line.number)
            if current.index in status.gpus and (status.gpus[current.index].links or status.gpus[current.index].all_down):
                status.findings.append(Finding(text.name, line.number, f"GPU {current.index} is listed twice: the first listing is kept"))
                current = None
            continue
        if current is None:
            continue
        if _ALL_DOWN.search(line.text):
            current.all_down = True
            _keep(status, current)
            continue
        if _ELIDED.match(line.text):
            current.elided = True
            _keep(status, current)
            continue
        link = _LINK.match(line.text)
        if not link:
            if line.text.strip():
                current = None  # the listing ended
            continue
        value = link.group(2)
        speed = _SPEED.match(value)
        if speed:
            current.links.append((int(link.group(1)), True, float(speed.group(1))))
        elif value.lower() in ("<inactive>", "inactive"):
            current.links.append((int(link.group(1)), False, None))
        else:
            continue  # `nvlink -e` and friends (Link 0: Replay Errors: 0): not a link state
        _keep(status, current)
    if not status.gpus:
        return []
    status.line = min(g.line for g in status.gpus.values())
    for listed in status.gpus.values():
        if listed.elided:
            shown = ", ".join(str(link) for link, _, _ in listed.links)
            status.findings.append(Finding(text.name, listed.line, f"GPU {listed.index}'s links are elided ('[...]'; links {shown} "
                                           "shown): its link count and states are unknown; the shown links' speed is used"))
    return [status]


def _keep(status: NvLinkStatus, gpu: GpuLinks) -> None:
    status.gpus.setdefault(gpu.index, gpu)
