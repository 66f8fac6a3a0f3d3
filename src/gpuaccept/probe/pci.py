"""NVIDIA functions on the PCI bus, as the kernel lists them: what is installed, driver or not.

NVML counts the GPUs its driver brought up. A GPU that fell off the bus or failed to initialize
is missing from NVML and is often still a PCI function; an NVSwitch is a PCI function of its own
on a bare-metal HGX board. Read from /sys/bus/pci/devices/<bdf>/{vendor,class,driver} (files
only, the root given: `/` on a machine, a small tree in the tests). A GPU bound to vfio-pci is
given to a VM on purpose, and is not counted.
"""

from __future__ import annotations

import os
from pathlib import Path

from gpuaccept.facts.record import Unavailable
from gpuaccept.probe.collect import normalize_bus_id
from gpuaccept.probe.network import PCI_DEVICES

NVIDIA_VENDOR = "0x10de"
GPU_CLASSES = ("0x0300", "0x0302")  # VGA-compatible and 3D controllers: what a GPU presents
NVSWITCH_CLASS = "0x0680"  # "bridge, other": how an NVSwitch presents itself
# drivers that hold a GPU for someone else on purpose (a VM's passthrough): not this machine's to test
GIVEN_AWAY = ("vfio-pci", "pci-stub")


def read_pci_functions(root: Path = Path("/")) -> tuple[list[str] | Unavailable, list[str] | Unavailable]:
    """(GPU bus ids, NVSwitch bus ids) of the NVIDIA functions under `root`, each normalized as NVML
    writes them; `Unavailable` where the bus cannot be read (no /sys: a container without it)."""
    base = root / PCI_DEVICES
    if not base.is_dir():
        missing = Unavailable(unavailable="not_found", detail=f"no /{PCI_DEVICES} to read the PCI functions from")
        return missing, missing
    gpus: list[str] = []
    switches: list[str] = []
    try:
        functions = sorted(base.iterdir())
        for function in functions:
            vendor = _read(function / "vendor")
            if vendor != NVIDIA_VENDOR:
                continue
            kind = _read(function / "class")
            if kind.startswith(GPU_CLASSES) and _driver(function) not in GIVEN_AWAY:
                gpus.append(normalize_bus_id(function.name))
            elif kind.startswith(NVSWITCH_CLASS):
                switches.append(normalize_bus_id(function.name))
    except OSError as exc:
        failed = Unavailable(unavailable="error", detail=f"/{PCI_DEVICES}: {exc.strerror or exc}")
        return failed, failed
    return gpus, switches


def _driver(function: Path) -> str:
    """The driver bound to a PCI function ('' where none is: a GPU the driver lost may be unbound)."""
    try:
        return os.path.basename(os.readlink(function / "driver"))
    except OSError:
        return ""


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="ascii").strip().lower()
    except (OSError, UnicodeDecodeError):
        return ""
