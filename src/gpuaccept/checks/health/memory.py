"""What the GPU's memory has recorded by the start of the run (state checks): row remaps pending,
failed or uncorrectable, pages retired or pending retirement, corrected ECC errors, and SRAM ECC
errors against their threshold.
"""

from __future__ import annotations

from typing import Any

from gpuaccept.checks.declare import GPU, check
from gpuaccept.checks.health.snapshots import all_of, at_start, unreadable
from gpuaccept.checks.verdict import AtMost, Criterion, Described, Equals, Judge, Verdict
from gpuaccept.facts.model import Facts
from gpuaccept.facts.record import Unavailable
from gpuaccept.profile.model import Profile
from gpuaccept.vocabulary.links import gpu_key


def _first_unknown(values: dict[str, Any]) -> tuple[str, Unavailable] | None:
    return next(((what, value) for what, value in values.items() if isinstance(value, Unavailable)), None)


@check(subjects=GPU, family="health_state")
def row_remapping(judge: Judge, profile: Profile, facts: Facts, gpu: int) -> Verdict:
    """No row remap pending or failed at the start, and uncorrectable remaps within the profile's limit."""
    limit = profile.spec.health.remapped_uncorrectable_max
    criterion = AtMost(limit, "rows")
    start = at_start(judge, facts, gpu)
    if isinstance(start, Verdict):
        return start
    subject = gpu_key(gpu)
    values = {
        "uncorrectable remaps": start.remapped_uncorrected,
        "remap pending": start.remap_pending,
        "remap failure": start.remap_failure,
    }
    context = {"remapped_corrected": start.remapped_corrected, **{k.replace(" ", "_"): v for k, v in values.items()}}
    rule = Described(f"no remap pending or failed, uncorrectable remaps <= {limit}")
    # a reading NVML does not give hides none of the others: any one that is read and breaks the rule fails
    if isinstance(start.remapped_uncorrected, int) and not criterion.holds(start.remapped_uncorrected):
        return judge(subject, "uncorrectable row remaps", start.remapped_uncorrected, criterion, context=context)
    if start.remap_failure is True:
        return judge.failed(
            subject, f"row remap failure at {start.label} (a bank ran out of spare rows), expected {rule}", True, rule, context=context
        )
    if start.remap_pending is True:
        return judge.failed(
            subject,
            f"row remap pending at {start.label} (takes effect at the next GPU reset), expected {rule}",
            True,
            rule,
            context=context,
        )
    unknown = _first_unknown(values)
    if unknown:
        return unreadable(judge, subject, unknown[0], unknown[1], criterion)
    return judge(
        subject,
        "uncorrectable row remaps",
        start.remapped_uncorrected,
        criterion,
        note=f"corrected {start.remapped_corrected}",
        context=context,
    )


@check(subjects=GPU, family="health_state")
def retired_pages(judge: Judge, profile: Profile, facts: Facts, gpu: int) -> Verdict:
    """No page pending retirement at the start, and retired pages (SBE + DBE) within the profile's limit."""
    limit = profile.spec.health.retired_pages_max
    criterion = AtMost(limit, "pages")
    start = at_start(judge, facts, gpu)
    if isinstance(start, Verdict):
        return start
    subject = gpu_key(gpu)
    values = {
        "retired pages (SBE)": start.retired_pages_sbe,
        "retired pages (DBE)": start.retired_pages_dbe,
        "pending retirement": start.retired_pending,
    }
    note = f"SBE {start.retired_pages_sbe}, DBE {start.retired_pages_dbe}"
    if start.retired_pending is True:
        rule = Described(f"no page pending retirement, retired pages <= {limit}")
        return judge.failed(subject, f"a page is pending retirement at {start.label}, expected {rule}", True, rule)
    # a reading NVML does not give hides none of the others: the pages that are read, over the limit, fail
    read = [pages for pages in (start.retired_pages_sbe, start.retired_pages_dbe) if isinstance(pages, int)]
    if not criterion.holds(sum(read)):
        what = "retired pages" if len(read) == 2 else "retired pages (at least: one count is not read)"
        return judge(subject, what, sum(read), criterion, note=note)
    unknown = _first_unknown(values)
    if unknown:
        return unreadable(judge, subject, unknown[0], unknown[1], criterion)
    return judge(subject, "retired pages", sum(read), criterion, note=note)


@check(subjects=GPU, family="health_state")
def ecc_corrected(judge: Judge, profile: Profile, facts: Facts, gpu: int) -> Verdict:
    """Corrected ECC errors (aggregate) at the start within the profile's limit, where it sets one."""
    limit = profile.spec.health.ecc_corrected_max
    if limit is None:
        return judge.not_applicable(gpu_key(gpu), "the profile sets no limit on corrected ECC errors (health.ecc_corrected_max)")
    start = at_start(judge, facts, gpu)
    if isinstance(start, Verdict):
        return start
    return judge(gpu_key(gpu), "corrected ECC errors (aggregate)", start.ecc.corrected_aggregate, AtMost(limit, "errors"))


@check(subjects=GPU, family="health_state")
def sram_ecc(judge: Judge, profile: Profile, facts: Facts, gpu: int) -> Verdict:
    """SRAM ECC errors (aggregate) within the profile's limits, and the SRAM error threshold not exceeded."""
    health = profile.spec.health
    start = at_start(judge, facts, gpu)
    if isinstance(start, Verdict):
        return start
    subject = gpu_key(gpu)
    checks: list[tuple[str, Any, Criterion]] = [
        ("SRAM uncorrected ECC errors (aggregate)", start.sram.uncorrected_aggregate, AtMost(health.sram_uncorrected_max, "errors")),
        ("SRAM corrected ECC errors (aggregate)", start.sram.corrected_aggregate, AtMost(health.sram_corrected_max, "errors")),
        ("SRAM error threshold exceeded", start.sram_threshold_exceeded, Equals(False)),
    ]
    return all_of(judge, subject, checks)
