"""The terminal summary: failures first, then the key measured values beside their thresholds."""

from __future__ import annotations

from gpuaccept.checks.verdict import show

# checks whose numbers are worth seeing even when they pass, in the order they are shown
KEY_CHECKS = (
    "busbw",
    "pair_busbw",
    "p2p_copy",
    "p2p_copy_bidirectional",
    "local_copy",
    "host_to_device",
    "device_to_host",
    "ddp_scaling",
    "ddp_exposed_comm",
    "ddp_nvlink_speedup",
    "no_regression",
)
PER_CHECK_LIMIT = 8


def summary_lines(tests: list[dict]) -> list[str]:
    lines = []
    bad = [t for t in tests if t["outcome"] in ("failed", "error")]
    if bad:
        lines.append(f"{len(bad)} test(s) did not pass:")
        for test in bad:
            lines.append(f"  {test['outcome'].upper():6} {test['id']}: {test.get('message') or ''}".rstrip())
    verdicts = [t["verdict"] for t in tests if t.get("verdict") and t["verdict"]["outcome"] in ("passed", "failed")]
    for check in KEY_CHECKS:
        rows = [v for v in verdicts if v["check"] == check and isinstance(v["measured"], (int, float))]
        if not rows:
            continue
        rows.sort(key=lambda v: (v["outcome"] == "passed", v["measured"]))  # failures, then the lowest values
        lines.append(f"{check}:")
        for verdict in rows[:PER_CHECK_LIMIT]:
            mark = "ok  " if verdict["outcome"] == "passed" else "FAIL"
            lines.append(f"  {mark} {verdict['subject']:24} {show(verdict['measured'], verdict['unit']):>14}   expected {verdict['expected']}")
        if len(rows) > PER_CHECK_LIMIT:
            lines.append(f"  ... {len(rows) - PER_CHECK_LIMIT} more (all in results.json)")
    return lines
