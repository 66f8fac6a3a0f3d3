"""What telemetry samples name: NVML's clock event reason bits, and durations as a person writes them.

The bits are nvmlClocksEventReasons (nvml.h, `nvmlClocksEventReason*`): the current API, whose
deprecated twin is the "throttle reasons" one. A GPU slowed by one of `SLOWDOWN_REASONS` is not
giving what it was bought for; software power capping and idling are normal under load or at rest.
"""

from __future__ import annotations

import re

CLOCK_EVENT_REASONS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}
# the reasons that fail a GPU when they hold for more than the profile's share of its load time
SLOWDOWN_REASONS = 0x8 | 0x40 | 0x80


def reason_names(bits: int) -> list[str]:
    """The names of the reasons set in `bits`, lowest bit first; unknown bits as hex."""
    names = [name for bit, name in CLOCK_EVENT_REASONS.items() if bits & bit]
    unknown = bits & ~sum(CLOCK_EVENT_REASONS)
    return names + ([f"0x{unknown:x}"] if unknown else [])


# A burn-in of a month is already more than any acceptance asks for
LONGEST_DURATION_S = 31 * 86400
DURATION_PATTERN = r"^\s*\d+(\.\d+)?\s*(s|m|h)?\s*$"
_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str) -> float:
    """'30m' -> 1800.0 seconds; '90s', '2h', '45' (seconds). ValueError names what is wrong."""
    found = re.match(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h)?\s*$", text)
    if not found:
        raise ValueError(f"{text!r} is not a duration: write a number with s, m or h (90s, 30m, 2h)")
    seconds = float(found.group(1)) * _UNITS[found.group(2) or ""]
    if seconds <= 0:
        raise ValueError(f"{text!r}: a duration must be more than 0")
    if seconds > LONGEST_DURATION_S:  # a number of hundreds of digits reads as infinity: a run that never ends
        raise ValueError(f"{text[:40]!r}: longer than any run this tool makes (at most {LONGEST_DURATION_S // 86400:.0f} days)")
    return seconds


def show_duration(seconds: float) -> str:
    """1830 -> '30m30s'; 42.4 -> '42s'."""
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"
