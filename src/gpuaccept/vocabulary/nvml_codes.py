"""NVML's codes, and the names this project gives them: NVLink versions, far ends of an NVLink,
NVSwitch fabric states, peer-to-peer capabilities and statuses (with the words nvidia-smi prints
for the statuses).

The probe records the codes as NVML answers them; checks, profiles and reports name them from here.
"""

from __future__ import annotations

import enum


class P2PCapability(enum.IntEnum):
    # nvidia-ml-py writes `NVML_P2P_CAPS_INDEX_READ = 0,` (a tuple), which ctypes cannot pass:
    # the indices are kept here instead.
    READ = 0
    WRITE = 1
    NVLINK = 2
    ATOMICS = 3
    PCI = 4


P2P_STATUS_NAMES = {
    0: "OK",
    1: "CHIPSET_NOT_SUPPORTED",
    2: "GPU_NOT_SUPPORTED",
    3: "IOH_TOPOLOGY_NOT_SUPPORTED",
    4: "DISABLED_BY_REGKEY",
    5: "NOT_SUPPORTED",
    6: "UNKNOWN",
}
# the same statuses as `nvidia-smi topo -p2p` prints them in its grid, each with NVML's name
P2P_STATUS_CODES = {
    "OK": P2P_STATUS_NAMES[0],
    "CNS": P2P_STATUS_NAMES[1],
    "GNS": P2P_STATUS_NAMES[2],
    "TNS": P2P_STATUS_NAMES[3],
    "DR": P2P_STATUS_NAMES[4],
    "NS": P2P_STATUS_NAMES[5],
    "U": P2P_STATUS_NAMES[6],
}

NVLINK_REMOTE_GPU = 0
NVLINK_REMOTE_SWITCH = 2
NVLINK_VERSION_NAMES = {1: "1.0", 2: "2.0", 3: "2.2", 4: "3.0", 5: "3.1", 6: "4.0", 7: "5.0", 8: "6.0"}
FABRIC_STATE_NAMES = {0: "not_supported", 1: "not_started", 2: "in_progress", 3: "completed"}
MAX_NVLINKS = 36  # NVML_NVLINK_MAX_LINKS in recent headers; older bindings say 18
