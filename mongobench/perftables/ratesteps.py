"""Rate steps: one variant at rising offered rates, a latency-versus-throughput curve.

Each selected variant runs first as declared (the closed loop: its saturated throughput),
then once per step in an open loop (`target_ops_per_s`, see driver.multiplex): at a
fraction of that measured throughput (`0.5`), or at a rate given in operations per second
(`500/s`). The steps' results are the variant's own, labelled `<label> @ 0.5x` or
`<label> @ 500/s`, and say which step they are (`rate_step`). Only single-operation
variants make a curve: a mix of reads and writes or a bulk operation has no one latency
to set against one rate, and is refused before anything runs. Pure functions: no server.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

from mongobench.perftables.experiments import ExperimentError, Variant

# 0.1 .. 1.2 of the closed loop's throughput: well below, around and beyond saturation
DEFAULT_FRACTIONS = (0.1, 0.25, 0.5, 0.75, 0.9, 1.0, 1.1, 1.2)
MAX_STEPS = 50
MAX_FRACTION = 100.0


@dataclass(frozen=True)
class Step:
    fraction: float | None = None  # of the closed loop's measured throughput
    rate: float | None = None  # operations per second, as given

    @property
    def name(self) -> str:
        return f"{self.fraction:g}x" if self.fraction is not None else f"{self.rate:g}/s"

    def target(self, closed_ops_per_s: float) -> float:
        return self.rate if self.rate is not None else self.fraction * closed_ops_per_s


def parse(spec: str | None, where: str = "--rate-steps") -> list[Step] | None:
    """`auto` (DEFAULT_FRACTIONS), fractions of the closed loop's throughput (`0.2,0.5,1.2`)
    or rates in operations per second (`100/s,400/s`); None: no rate steps."""
    if spec is None:
        return None
    text = str(spec).strip()
    if text == "auto":
        return [Step(fraction=f) for f in DEFAULT_FRACTIONS]
    items = [t.strip() for t in text.split(",")]
    if not text or not all(items):
        raise ExperimentError(
            f"{where} {spec!r}: give 'auto', fractions (0.25,0.5,1.2) or rates (100/s,400/s)"
        )
    steps = []
    for item in items:
        per_s = item.endswith("/s")
        try:
            value = float(item[:-2] if per_s else item)
        except ValueError:
            raise ExperimentError(
                f"{where}: {item!r} is neither a fraction (0.5) nor a rate (500/s)"
            ) from None
        if not (value > 0 and value < float("inf")):
            raise ExperimentError(f"{where}: {item!r} must be a number > 0")
        if not per_s and value > MAX_FRACTION:
            raise ExperimentError(
                f"{where}: {item!r} is over {MAX_FRACTION:g} times the closed loop's"
                f" throughput; give a rate as {item}/s"
            )
        steps.append(Step(rate=value) if per_s else Step(fraction=value))
    if len({s.fraction is None for s in steps}) > 1:
        raise ExperimentError(f"{where} {spec!r}: fractions and rates (…/s) cannot be mixed")
    if len(steps) > MAX_STEPS:
        raise ExperimentError(f"{where}: {len(steps)} steps, at most {MAX_STEPS}")
    if len({s.name for s in steps}) != len(steps):
        raise ExperimentError(f"{where} {spec!r}: a step is given twice")
    return sorted(steps, key=lambda s: s.fraction if s.fraction is not None else s.rate)


def multi_operation(workload: str, settings: dict) -> str | None:
    """Why a variant is not a single operation at a time (None: it is)."""
    if workload == "mixed":
        return "mixes inserts and queries"
    if workload == "read_update" and 0 < float(settings.get("read_proportion", 1)) < 1:
        return f"mixes reads and updates (read_proportion {settings['read_proportion']})"
    if workload == "insert" and int(settings.get("batch_size") or 1) > 1:
        return f"inserts in batches of {settings['batch_size']} (a bulk operation)"
    if workload == "delete" and int(settings.get("docs_per_delete") or 1) > 1:
        return f"deletes {settings['docs_per_delete']} documents per operation (a bulk operation)"
    return None


def check(plans, where: str = "--rate-steps") -> None:
    """Refuses, before anything runs, the variants rate steps make no sense for."""
    for experiment, variants in plans:
        for v in variants:
            why = multi_operation(experiment.workload, v.settings)
            if why:
                raise ExperimentError(
                    f"{where}: {experiment.name} [{v.label}] {why}; rate steps need a"
                    " single-operation variant (leave it out with --variants or --skip)"
                )
            if v.settings.get("target_ops_per_s"):
                raise ExperimentError(
                    f"{where}: {experiment.name} [{v.label}] sets target_ops_per_s; the"
                    " steps set it themselves (the first step is the closed loop)"
                )


def closed_loop_rate(res: dict) -> float | None:
    """The operations per second of a variant's closed-loop result (None: nothing to
    step from: failed, or no operation done)."""
    if res.get("status") != "ok":
        return None
    ops = sum((res.get("ops") or {}).values())
    return ops / res["duration_s"] if ops and res.get("duration_s") else None


def step_variant(v: Variant, step: Step, closed_ops_per_s: float) -> Variant:
    """The variant `v` at `step`'s rate (its own label, the target in its settings)."""
    out = copy.deepcopy(v)
    out.settings["target_ops_per_s"] = round(step.target(closed_ops_per_s), 3)
    out.label = f"{v.label} @ {step.name}"
    out.base_label = f"{v.base_label} @ {step.name}"
    return out


def step_record(i: int, steps: list[Step], closed_ops_per_s: float | None) -> dict:
    """What a result says about its place in the curve (`i`: 0 the closed loop)."""
    rec = {"step": i, "steps": len(steps), "closed_loop_ops_per_s": closed_ops_per_s}
    if i:
        step = steps[i - 1]
        rec.update(name=step.name, fraction=step.fraction, rate=step.rate)
    return rec
