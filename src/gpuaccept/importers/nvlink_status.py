"""`nvidia-smi nvlink -s` (`--status`): each GPU's links, up at their speed or `<inactive>`.

A GPU whose links are all down prints one NVML line instead of its links. People shorten long
listings (`[...]`, `......`, `<snip>`) and trim the GPU lines' `(UUID: ...)`: links left out are
unknown, never assumed up or down, and a listing shortened anywhere but inside one GPU's links may
have left GPUs out, so it does not tell how many GPUs the machine has. Error-counter listings
(`nvlink -e`, `Link 0: Replay Errors: 0`) share the layout and are not link states.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gpuaccept.importers.text import MAX_GPU_INDEX, Finding, TextFile

# the UUID part may be trimmed to `(UUID: ...)` or left out; a clipped line loses its closing parenthesis
_GPU = re.compile(r"^\s*GPU (\d+): (.+?)\s*(?:\(UUID:\s*([^)]*)\)?)?\s*$")
_UUID = re.compile(r"^(GPU|MIG)-[0-9a-fA-F-]{8,}$")
_LINK = re.compile(r"^\s*Link (\d+):\s*(.+?)\s*$")
_SPEED = re.compile(r"^(\d+(?:\.\d+)?) GB/s$")
_ALL_DOWN = re.compile(r"NVML: Unable to retrieve NVLink information as all links are inActive", re.IGNORECASE)
# what people put where they left lines out: dots or an ellipsis (bracketed or not), a snip mark
_ELIDED = re.compile(r"^\s*[\[(<{]?\s*(\.{2,}|…+|snip(ped)?|cut|omitted|truncated|etc\.?)\s*[\])>}]?\s*$", re.IGNORECASE)
KIND = "nvidia-smi nvlink -s"


@dataclass
class GpuLinks:
    index: int
    name: str
    uuid: str  # "" where the line's UUID is trimmed
    line: int
    links: list[tuple[int, bool, float | None]] = field(default_factory=list)  # (link, up, GB/s)
    all_down: bool = False  # NVML said every link is inactive, without listing them
    elided: bool = False  # the listing leaves links out
    twice: int | None = None  # a link listed twice: which links this GPU has is not known


@dataclass
class NvLinkStatus:
    file: str
    line: int
    gpus: dict[int, GpuLinks] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)
    gpus_left_out: int | None = None  # the line of an elision that may hide GPUs, or a gap in their numbers

    @property
    def tells_gpu_count(self) -> bool:
        """Whether the listing shows every GPU: nothing left out between or around them."""
        return self.gpus_left_out is None

    def describe(self) -> str:
        return f"{KIND} ({len(self.gpus)} GPUs)"


def find_nvlink_status(text: TextFile) -> list[NvLinkStatus]:
    status = NvLinkStatus(text.name, 0)
    current: GpuLinks | None = None  # the GPU whose links are being read
    last: GpuLinks | None = None  # the GPU listed last, while its listing may go on
    elided_at: int | None = None  # an elision line, until what follows it says what it left out
    for line in text.lines:
        gpu = _GPU.match(line.text)
        if gpu and int(gpu.group(1)) > MAX_GPU_INDEX:
            status.findings.append(Finding(text.name, line.number, f"GPU {gpu.group(1)} is beyond any machine (GPU indices "
                                           f"stop at {MAX_GPU_INDEX} here): a damaged line; its links are not used"))
            current = None
            continue
        if gpu:
            index = int(gpu.group(1))
            if elided_at is not None:  # lines left out before this GPU: the links above, and GPUs where one is skipped
                if last is not None:
                    last.elided = True
                if (last is None and index != 0) or (last is not None and index != last.index + 1):
                    status.gpus_left_out = status.gpus_left_out or elided_at
                elided_at = None
            current = GpuLinks(index, gpu.group(2).strip(), _uuid(gpu.group(3)), line.number)
            if index in status.gpus and (status.gpus[index].links or status.gpus[index].all_down):
                status.findings.append(Finding(text.name, line.number, f"GPU {index} is listed twice: the first listing is kept"))
                current = None
            continue
        if _ELIDED.match(line.text):
            elided_at = elided_at or line.number
            continue
        if current is None:
            if line.text.strip():
                elided_at = None  # dots among other text, not in a listing
            continue
        if _ALL_DOWN.search(line.text):
            current.all_down = True
            last = _keep(status, current)
            continue
        link = _LINK.match(line.text)
        reading = _reading(link.group(2)) if link else None
        if link is None or reading is None:
            if link is None and line.text.strip():
                _listing_ends(status, last, elided_at)  # other output: the listing ended
                current, last, elided_at = None, None, None
            continue  # a line of `nvlink -e` and friends (Link 0: Replay Errors: 0) is not a link state
        number = int(link.group(1))
        if elided_at is not None:  # lines left out between two links of one GPU: only its links
            current.elided, elided_at = True, None
        if any(known == number for known, _, _ in current.links) and current.twice is None:
            current.twice = number
            status.findings.append(Finding(text.name, line.number, f"GPU {current.index} lists link {number} twice: which "
                                           "links it has is not known; its links are not used"))
        current.links.append((number, *reading))
        last = _keep(status, current)
    _listing_ends(status, last, elided_at)
    if current is not None and last is current:
        _cut_at_the_end(status, current, text)
    if not status.gpus:
        return []
    status.line = min(g.line for g in status.gpus.values())
    indices = sorted(status.gpus)
    if status.gpus_left_out is None and indices != list(range(len(indices))):
        status.gpus_left_out = status.line
        missing = sorted(set(range(indices[-1] + 1)) - set(indices))
        status.findings.append(Finding(text.name, status.line, f"the listing leaves GPU(s) {', '.join(map(str, missing))} out: "
                                       "it does not tell how many GPUs the machine has"))
    elif status.gpus_left_out is not None and not any(f.line == status.gpus_left_out for f in status.findings):
        status.findings.append(Finding(text.name, status.gpus_left_out, "lines are left out of the listing here, where GPUs "
                                       "may be: it does not tell how many GPUs the machine has"))
    for listed in status.gpus.values():
        numbers = sorted({link for link, _, _ in listed.links})
        if numbers and numbers != list(range(numbers[-1] + 1)):
            listed.elided = True  # nvidia-smi lists every link from 0: links missing between were left out
        if listed.elided and listed.twice is None:
            shown = ", ".join(str(link) for link, _, _ in listed.links)
            status.findings.append(Finding(text.name, listed.line, f"GPU {listed.index}'s links are elided (links {shown or 'none'} "
                                           "shown): its link count and states are unknown; the shown links' speed is used"))
    return [status]


def _reading(value: str) -> tuple[bool, float | None] | None:
    """(up, GB/s) of a link's state, or None for another reading (an error counter)."""
    speed = _SPEED.match(value)
    if speed:
        return True, float(speed.group(1))
    if value.lower() in ("<inactive>", "inactive"):
        return False, None
    return None


def _listing_ends(status: NvLinkStatus, last: GpuLinks | None, elided_at: int | None) -> None:
    """A listing that ends with lines left out: the last GPU's links, and any GPUs after it."""
    if last is not None and elided_at is not None:
        last.elided = True
        status.gpus_left_out = status.gpus_left_out or elided_at


def _cut_at_the_end(status: NvLinkStatus, last: GpuLinks, text: TextFile) -> None:
    """A file that ends inside the last GPU's links (`| head`, a ticket's size limit), where that GPU
    shows fewer links than another of its model: the rest of its links, and GPUs after it, are cut."""
    most = max((len(g.links) for g in status.gpus.values() if g is not last and g.name == last.name), default=0)
    if last.elided or len(last.links) >= most:
        return
    last.elided = True
    status.gpus_left_out = status.gpus_left_out or text.lines[-1].number
    status.findings.append(Finding(text.name, text.lines[-1].number, f"the listing ends inside GPU {last.index}'s links "
                                   f"({len(last.links)} shown, another {last.name} has {most}): the output is cut here"))


def _uuid(text: str | None) -> str:
    """The GPU line's UUID, or "" where it is trimmed (`(UUID: ...)`, `(UUID: <redacted>)`) or left out."""
    return text.strip() if text and _UUID.match(text.strip()) else ""


def _keep(status: NvLinkStatus, gpu: GpuLinks) -> GpuLinks:
    status.gpus.setdefault(gpu.index, gpu)
    return gpu
