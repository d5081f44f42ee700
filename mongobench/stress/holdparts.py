"""The memory hold kept from step to step, as parts.

A step with n instances holds what they must not have (placement.hold_plan). Started afresh
at every step, stress-ng populates and frees tens of GiB of locked memory each time. As
parts it is started once and then changed by the difference: one part for each instance
slot m a step does not run (what instance m would have: H(m) - H(m+1)), and a base part
that no step's instances may have, H(max_instances). A step going from 4 to 6 instances
stops the parts of slots 4 and 5; one going back to 5 starts slot 5's part again. Per NUMA
node, each node has its own parts. A fixed hold (--mongodb_stress_hold_memory_gb) is all
base: it is started once and kept.

    want = holdparts.parts(lambda m: placement.hold_plan(...m...), n, max_instances)
    stop, start = holdparts.changes(held, want)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from mongobench.stress.placement import HoldPlan

# A part smaller than this is not held (stress_ng.Start holds nothing below 1 MiB either);
# node shares split by size may rise by a few bytes where the total falls (rounding).
MIN_PART_BYTES = 1024 * 1024


@dataclass(frozen=True)
class Part:
    """One stress-ng process of the hold: `nbytes` on NUMA node `node` (None: any node)."""

    key: str
    nbytes: int
    node: int | None = None


def _by_node(plan: HoldPlan) -> dict[int | None, int]:
    if plan.node_bytes is not None:
        return {int(k): int(v) for k, v in plan.node_bytes.items()}
    return {None: int(plan.hold_bytes)}


def parts(
    plan_of: Callable[[int], HoldPlan], n: int, max_instances: int
) -> tuple[dict[str, Part], bool]:
    """(the parts that hold step n's plan, whether they are kept from step to step): for
    each node, slot m's part (n <= m < max_instances) and the base; their bytes sum to
    plan_of(n)'s within MIN_PART_BYTES a part. Where a node's hold would rise with the
    instance count by more than that (placement's plans never do), parts cannot follow it:
    then the whole plan, one part a node named for step n, which the next step replaces."""
    if not 0 <= n <= max_instances:
        raise ValueError(f"step of {n} instance(s) outside 0..{max_instances}")
    holds = {m: _by_node(plan_of(m)) for m in range(n, max_instances + 1)}
    out = {}
    for node in holds[n]:
        where = "" if node is None else f"-node{node}"
        for m in range(n, max_instances):
            diff = holds[m].get(node, 0) - holds[m + 1].get(node, 0)
            if diff < -MIN_PART_BYTES:
                return _whole(holds[n], n), False
            if diff >= MIN_PART_BYTES:
                out[f"slot{m}{where}"] = Part(f"slot{m}{where}", diff, node)
        base = holds[max_instances].get(node, 0)
        if base >= MIN_PART_BYTES:
            out[f"base{where}"] = Part(f"base{where}", base, node)
    return out, True


def _whole(hold: Mapping[int | None, int], n: int) -> dict[str, Part]:
    out = {}
    for node, nbytes in hold.items():
        key = f"step{n}" + ("" if node is None else f"-node{node}")
        if nbytes >= MIN_PART_BYTES:
            out[key] = Part(key, nbytes, node)
    return out


def changes(held: Mapping[str, Part], want: Mapping[str, Part]) -> tuple[list[str], list[Part]]:
    """(keys of the held parts to stop, parts to start) to go from `held` to `want`: a part
    is kept only where it is the same part (same key, bytes and node)."""
    stop = sorted(k for k, p in held.items() if want.get(k) != p)
    start = [p for k, p in sorted(want.items()) if held.get(k) != p]
    return stop, start


def total(held: Mapping[str, Part]) -> int:
    return sum(p.nbytes for p in held.values())
