"""A burn-in judged while hot: the telemetry of its sustained load and the load's rounds, per GPU.

- thermal steady state: the first moment the GPU's temperature, fitted over the last
  `burnin.steady_window_s` of samples, rises slower than `burnin.steady_slope_c_per_min`. A GPU
  still heating when the load ends could not be judged hot: an error that asks for a longer burn-in.
- GEMM throughput hot: the rounds of the load that began at or after that moment, each against the
  GPU's first round (its coolest), at least `burnin.hot_throughput_min` of it; the second-worst hot
  round decides (the only one, where there is one), as in every burn-in value. The verdict names the
  power, temperature and clock event reasons of the deciding round: what a throttling GPU shows.
- power under load: the median of the GPU's power samples under the load after its first minute
  (after its first half, where it ran less than two), while its products ran alone (its memory tests,
  memory bound, and the fabric stages beside the load draw less by design and are left out; fewer
  than five samples left could not judge), as a share of NVML's power limit: at least
  `burnin.min_power_share` where the profile sets one, and at most `burnin.power_within_best` below
  the best GPU of the machine.

The load's rounds sit on the telemetry's time line by the burn-in's and the telemetry's start
(`started_at`, both UTC).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from gpuaccept.checks.declare import GPU, check
from gpuaccept.checks.missing import SUSTAINED_LOAD
from gpuaccept.checks.stages import stages_asked
from gpuaccept.checks.verdict import AtLeast, InRange, Judge, Verdict
from gpuaccept.facts.measurements import GemmResult, MemtestResult
from gpuaccept.facts.model import Facts
from gpuaccept.facts.telemetry import BurnIn, BurnInRound, Telemetry, TelemetrySample
from gpuaccept.profile.model import Profile
from gpuaccept.vocabulary.display import show
from gpuaccept.vocabulary.links import gpu_key
from gpuaccept.vocabulary.steps import LoadKey
from gpuaccept.vocabulary.telemetry import reason_names

POWER_SETTLE_S = 60.0  # power is judged after the load's first minute, as a GPU reaches its limit
POWER_MIN_SAMPLES = 5  # no single sample, nor two, decides a GPU's power
CUT_SHORT = "the burn-in was ended by a signal after {load_s:.0f} s of sustained load: {what} (its exit status says it was cut short)"


@dataclass(frozen=True)
class LoadTimeline:
    """The sustained load of a burn-in on the telemetry's time line (seconds since sampling began)."""

    telemetry: Telemetry
    burnin: BurnIn
    offset_s: float  # the burn-in's start on the telemetry's time line
    began_s: float
    ended_s: float

    def samples(self, gpu: int, after_s: float | None = None, before_s: float | None = None) -> list[TelemetrySample]:
        low = self.began_s if after_s is None else after_s
        high = self.ended_s if before_s is None else before_s
        return [s for s in self.telemetry.of_gpu(gpu) if low <= s.t_s <= high]

    def round_span(self, burnin_round: BurnInRound) -> tuple[float, float]:
        began = self.offset_s + burnin_round.started_s
        return began, began + burnin_round.wall_s

    def load_rounds(self) -> list[BurnInRound]:
        return [r for r in self.burnin.rounds if r.stages == ["compute"] and not r.beside_load]


def _cut_short(judge: Judge, subject: str, load_s: float, what: str) -> Verdict:
    """A burn-in ended by a signal before its load could show this: could not judge, the facts
    holding no whole sustained load (never a skip: the profile asked for it)."""
    verdict = judge.error(subject, CUT_SHORT.format(load_s=load_s, what=what))
    return verdict.model_copy(update={"missing": "the facts hold no whole sustained load (the burn-in was ended by a signal)"})


def load_timeline(judge: Judge, profile: Profile, facts: Facts, subject: str) -> LoadTimeline | Verdict:
    """Where the sustained load ran, or why it cannot be judged (could not judge where the facts hold
    no burn-in load of a profile that asks for one, a skip where it asks for none, an error where its
    telemetry is missing)."""
    burnin, telemetry = facts.burnin, facts.telemetry
    if burnin is None or burnin.load_started_s is None or burnin.load_ended_s is None or not burnin.started_at:
        return judge.missing(subject, SUSTAINED_LOAD, asked="compute" in stages_asked(profile))
    if telemetry is None:
        return judge.error(subject, "the burn-in's sustained load ran, and no telemetry was sampled to judge it by")
    if telemetry.not_sampled:
        return judge.error(subject, f"telemetry could not be sampled: {telemetry.not_sampled}")
    offset = burnin.offset_on(telemetry)
    return LoadTimeline(telemetry, burnin, offset, offset + burnin.load_started_s, offset + burnin.load_ended_s)


def _slope_per_min(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of (seconds, °C) points, in °C a minute."""
    mean_t = statistics.fmean(t for t, _ in points)
    mean_c = statistics.fmean(c for _, c in points)
    spread = sum((t - mean_t) ** 2 for t, _ in points)
    return 60.0 * sum((t - mean_t) * (c - mean_c) for t, c in points) / spread if spread else 0.0


@dataclass(frozen=True)
class SteadyState:
    reached_s: float | None  # on the telemetry's time line; None where the GPU never got there
    last_slope: float | None  # °C a minute over the last full window of the load
    samples: int


def steady_state(timeline: LoadTimeline, gpu: int, window_s: float, slope_c_per_min: float) -> SteadyState:
    """The first sample from which the temperature over the window before it rises slower than
    `slope_c_per_min`: the GPU has reached thermal steady state there."""
    points = [(s.t_s, float(s.temperature_c)) for s in timeline.samples(gpu) if isinstance(s.temperature_c, int)]
    last: float | None = None
    start = 0
    for end, (t, _) in enumerate(points):
        while points[start][0] < t - window_s:
            start += 1
        if t - timeline.began_s < window_s or end - start < 2:
            continue  # a full window of the load, and enough points to fit a line through
        last = _slope_per_min(points[start : end + 1])
        if last <= slope_c_per_min:
            return SteadyState(t, last, len(points))
    return SteadyState(None, last, len(points))


def _steady_or_verdict(judge: Judge, profile: Profile, facts: Facts, gpu: int) -> tuple[LoadTimeline, SteadyState] | Verdict:
    subject = gpu_key(gpu)
    timeline = load_timeline(judge, profile, facts, subject)
    if isinstance(timeline, Verdict):
        return timeline
    burnin = profile.spec.burnin
    found = steady_state(timeline, gpu, burnin.steady_window_s, burnin.steady_slope_c_per_min)
    load_s = timeline.ended_s - timeline.began_s
    if found.samples == 0 and timeline.burnin.ended == "interrupted":
        return _cut_short(judge, subject, load_s, "no temperature sample under it")
    if found.samples == 0:
        return judge.error(subject, f"no temperature sample of {subject} under the {load_s:.0f} s sustained load")
    if found.reached_s is None and timeline.burnin.ended == "interrupted":
        return _cut_short(judge, subject, load_s, "thermal steady state not reached")
    if found.reached_s is None:
        rising = f"still rising {found.last_slope:.2g} °C/min" if found.last_slope is not None else "no full window"
        return judge.error(
            subject,
            f"did not reach thermal steady state in the {load_s:.0f} s sustained load ({rising} over the last "
            f"{burnin.steady_window_s:g} s; steady below {burnin.steady_slope_c_per_min:g} °C/min): not judged hot, burn in longer",
        )
    return timeline, found


@check(subjects=GPU)
def thermal_steady_state(judge: Judge, profile: Profile, facts: Facts, gpu: int) -> Verdict:
    """The GPU reaches thermal steady state within the burn-in's sustained load."""
    found = _steady_or_verdict(judge, profile, facts, gpu)
    if isinstance(found, Verdict):
        return found
    timeline, steady = found
    assert steady.reached_s is not None
    after = steady.reached_s - timeline.began_s
    load_s = timeline.ended_s - timeline.began_s
    temperatures = [s.temperature_c for s in timeline.samples(gpu, after_s=steady.reached_s) if isinstance(s.temperature_c, int)]
    note = (
        f"temperature slope {steady.last_slope:.2g} °C/min over {profile.spec.burnin.steady_window_s:g} s "
        f"(steady below {profile.spec.burnin.steady_slope_c_per_min:g}); {min(temperatures)}-{max(temperatures)} °C from then on"
    )
    context = {"steady_at_s": round(steady.reached_s, 1), "slope_c_per_min": round(steady.last_slope or 0.0, 3)}
    # reached within the load, which is what makes the hot rounds exist: time to it is reported
    criterion = InRange(0.0, round(load_s, 1), "s")
    return judge(gpu_key(gpu), "thermal steady state after", round(after, 1), criterion, note=note, context=context)


def _gemm(burnin_round: BurnInRound, gpu: int) -> GemmResult | None:
    sweep = burnin_round.measurements.compute
    result = sweep.result(LoadKey("gemm", gpu)) if sweep else None
    return result if isinstance(result, GemmResult) else None


def window_conditions(timeline: LoadTimeline, gpu: int, span: tuple[float, float]) -> str:
    """Power, temperature and clock event reasons of a GPU over a stretch of the load, for people."""
    samples = timeline.samples(gpu, after_s=span[0], before_s=span[1])
    power = [s.power_w for s in samples if isinstance(s.power_w, float)]
    heat = [s.temperature_c for s in samples if isinstance(s.temperature_c, int)]
    reasons = sorted({name for s in samples if isinstance(s.clock_event_reasons, int) for name in reason_names(s.clock_event_reasons)})
    limits = timeline.telemetry.limits_of(gpu)
    limit = limits.power_limit_w if limits and isinstance(limits.power_limit_w, float) else None
    slowdown = limits.slowdown_temperature_c if limits and isinstance(limits.slowdown_temperature_c, int) else None
    parts = [
        f"power median {show(statistics.median(power), 'W')}" + (f" of {show(limit, 'W')}" if limit else "") if power else "power not read",
        f"temperature {min(heat)}-{max(heat)} °C" + (f" (slowdown {slowdown} °C)" if slowdown else "") if heat else "temperature not read",
        f"clock events: {', '.join(reasons) or 'none'}",
    ]
    return "; ".join(parts)


@check(subjects=GPU, marginal=True)
def hot_gemm_throughput(judge: Judge, profile: Profile, facts: Facts, gpu: int) -> Verdict:
    """GEMM throughput from thermal steady state on is at least the profile's share of its first round's."""
    subject = gpu_key(gpu)
    share = profile.spec.burnin.hot_throughput_min
    if share is None:
        return judge.not_applicable(subject, f"profile {profile.name} sets no burnin.hot_throughput_min")
    found = _steady_or_verdict(judge, profile, facts, gpu)
    if isinstance(found, Verdict):
        return found
    timeline, steady = found
    assert steady.reached_s is not None
    measured = [(r, g) for r in timeline.load_rounds() if (g := _gemm(r, gpu)) is not None]
    if not measured:
        return judge.error(subject, f"no round of the sustained load measured {subject}'s GEMM")
    cool_round, cool = measured[0]
    hot = [(r, g) for r, g in measured[1:] if timeline.round_span(r)[0] >= steady.reached_s]
    if not hot and timeline.burnin.ended == "interrupted":
        load_s = timeline.ended_s - timeline.began_s
        return _cut_short(judge, subject, load_s, "no round began at thermal steady state")
    if not hot:
        return judge.error(
            subject,
            f"no round of the sustained load began after {subject} reached thermal steady state "
            f"({steady.reached_s - timeline.began_s:.0f} s into it, of {timeline.ended_s - timeline.began_s:.0f} s): burn in longer",
        )
    ranked = sorted(hot, key=lambda pair: pair[1].tflops)
    deciding_round, deciding = ranked[1] if len(ranked) > 1 else ranked[0]
    criterion = AtLeast(cool.tflops * share, "TFLOP/s")
    conditions = window_conditions(timeline, gpu, timeline.round_span(deciding_round))
    values = ", ".join(show(g.tflops) for _, g in hot)
    note = (
        f"at least {share:g} of round {cool_round.index}'s {show(cool.tflops, 'TFLOP/s')} (the load's first); deciding: round "
        f"{deciding_round.index}, {conditions}; {len(hot)} round(s) at steady state: {values}"
    )
    context = {
        "cool_round": cool_round.index, "cool_tflops": round(cool.tflops, 2), "deciding_round": deciding_round.index,
        "hot_rounds": [r.index for r, _ in hot], "hot_tflops": [round(g.tflops, 2) for _, g in hot], "conditions": conditions,
    }
    return judge(subject, "GEMM at thermal steady state", deciding.tflops, criterion, note=note, context=context)


def _other_work(timeline: LoadTimeline, gpu: int) -> list[tuple[float, float]]:
    """The stretches of the sustained load where the GPU ran more than its products, drawing less
    power by design: its memory tests (memory bound, each the last step of its round) and the fabric
    stages run beside the load (their kernels and copies share the GPU with the products). Each is
    widened by a telemetry period, a sample's own span."""
    spans = [timeline.round_span(r) for r in timeline.burnin.rounds if r.beside_load]
    for load_round in timeline.load_rounds():
        sweep = load_round.measurements.compute
        tests = [r for r in sweep.results if isinstance(r, MemtestResult) and r.gpu == gpu] if sweep is not None else []
        _, round_ended = timeline.round_span(load_round)
        spans += [(round_ended - test.seconds, round_ended) for test in tests]
    pad = timeline.telemetry.period_s
    return [(began - pad, ended + pad) for began, ended in spans]


def _power_shares(timeline: LoadTimeline, gpus: int) -> dict[int, tuple[float, int, float]]:
    """Each GPU's median power while its products ran alone after the load settled, as a share of its
    limit: (share, samples, limit W). A GPU with fewer than POWER_MIN_SAMPLES such samples has none."""
    load_s = timeline.ended_s - timeline.began_s
    settle = POWER_SETTLE_S if load_s >= 2 * POWER_SETTLE_S else load_s / 2
    shares = {}
    for gpu in range(gpus):
        limits = timeline.telemetry.limits_of(gpu)
        limit = limits.power_limit_w if limits is not None else None
        other = _other_work(timeline, gpu)
        power = [s.power_w for s in timeline.samples(gpu, after_s=timeline.began_s + settle)
                 if isinstance(s.power_w, float) and not any(began <= s.t_s <= ended for began, ended in other)]
        if isinstance(limit, float) and limit > 0 and len(power) >= POWER_MIN_SAMPLES:
            shares[gpu] = (statistics.median(power) / limit, len(power), limit)
    return shares


def _power_or_verdict(
    judge: Judge, profile: Profile, facts: Facts, gpu: int
) -> tuple[LoadTimeline, dict[int, tuple[float, int, float]]] | Verdict:
    subject = gpu_key(gpu)
    timeline = load_timeline(judge, profile, facts, subject)
    if isinstance(timeline, Verdict):
        return timeline
    shares = _power_shares(timeline, facts.gpu_count)
    if gpu in shares:
        return timeline, shares
    limits = timeline.telemetry.limits_of(gpu)
    samples = timeline.samples(gpu)
    if limits is not None and not isinstance(limits.power_limit_w, float):
        why = f"NVML gives no power limit: {limits.power_limit_w}"
    elif samples and not any(isinstance(s.power_w, float) for s in samples):
        why = f"NVML gives no power reading: {samples[0].power_w}"
    elif timeline.burnin.ended == "interrupted":
        load_s = timeline.ended_s - timeline.began_s
        return _cut_short(judge, subject, load_s, "no power sample once it settled")
    else:
        why = (f"fewer than {POWER_MIN_SAMPLES} power samples while its products ran alone once the load settled (its memory "
               "tests and the fabric stages beside the load left out): burn in longer")
    return judge.error(subject, f"{subject}'s power under the sustained load could not be judged: {why}")


@check(subjects=GPU, marginal=True)
def power_under_load(judge: Judge, profile: Profile, facts: Facts, gpu: int) -> Verdict:
    """The median power drawn while the products ran alone, once the load settled, is at least the profile's share of NVML's power limit."""
    subject = gpu_key(gpu)
    floor = profile.spec.burnin.min_power_share
    if floor is None:
        return judge.not_applicable(subject, f"profile {profile.name} sets no burnin.min_power_share")
    found = _power_or_verdict(judge, profile, facts, gpu)
    if isinstance(found, Verdict):
        return found
    _, shares = found
    share, samples, limit = shares[gpu]
    note = (f"median of {samples} samples while its products ran alone after the load settled, of NVML's power limit "
            f"{show(limit, 'W')}")
    return judge(subject, "power under the sustained load", round(100 * share, 2), AtLeast(100 * floor, "%"), note=note,
                 context={"samples": samples, "power_limit_w": limit})


@check(subjects=GPU, marginal=True)
def power_within_best(judge: Judge, profile: Profile, facts: Facts, gpu: int) -> Verdict:
    """The power drawn under the sustained load is within the profile's share of the best GPU's."""
    subject = gpu_key(gpu)
    within = profile.spec.burnin.power_within_best
    if within is None:
        return judge.not_applicable(subject, f"profile {profile.name} sets no burnin.power_within_best")
    if facts.gpu_count < 2:
        return judge.not_applicable(subject, "one GPU under test: no sibling to compare its power with")
    found = _power_or_verdict(judge, profile, facts, gpu)
    if isinstance(found, Verdict):
        return found
    _, shares = found
    best = max(shares, key=lambda g: shares[g][0])
    share = shares[gpu][0]
    criterion = AtLeast(round(100 * shares[best][0] * (1 - within), 2), "%")
    note = f"at most {within:.0%} below the best GPU, {gpu_key(best)} at {100 * shares[best][0]:.1f}% of its limit"
    return judge(subject, "power under the sustained load", round(100 * share, 2), criterion, note=note,
                 context={"best_gpu": gpu_key(best), "best_share_pct": round(100 * shares[best][0], 2)})
