"""The memory hold kept from step to step as parts (mongobench.stress.holdparts), over the
plans placement.hold_plan really makes."""

import random

import pytest

from mongobench.core.units import GiB
from mongobench.remote.probes import NumaNode
from mongobench.stress import holdparts, placement
from mongobench.stress.placement import HoldPlan

ONE = (NumaNode(0, tuple(range(8)), 64_000),)
TWO = (NumaNode(0, (0, 1, 2, 3), 64_000), NumaNode(1, (4, 5, 6, 7), 32_000))
CXL = (NumaNode(0, (0, 1, 2, 3), 64_000), NumaNode(2, (), 16_000))


def plan_of(usable, per, nodes=ONE, *, per_node=False, bound=False, fixed=None, max_n=8):
    placed = placement.instance_nodes(max_n, nodes)
    return lambda m: placement.hold_plan(
        usable,
        per,
        m,
        nodes=nodes,
        instance_nodes=placed,
        fixed_bytes=fixed,
        per_node=per_node,
        bound=bound,
    )


def by_node(plan: HoldPlan) -> dict:
    return dict(plan.node_bytes) if plan.node_bytes is not None else {None: plan.hold_bytes}


def held_by_node(parts: dict) -> dict:
    out = {}
    for p in parts.values():
        out[p.node] = out.get(p.node, 0) + p.nbytes
    return out


def test_a_step_up_stops_the_slots_it_now_runs_and_a_step_down_starts_them_again():
    plan = plan_of(100 * GiB, 10 * GiB)
    three, kept = holdparts.parts(plan, 3, 8)
    assert kept
    assert {k: p.nbytes for k, p in three.items()} == {
        **{f"slot{m}": 10 * GiB for m in range(3, 8)},
        "base": 20 * GiB,  # what 8 instances still must not have
    }
    assert holdparts.total(three) == plan(3).hold_bytes == 70 * GiB
    six, _ = holdparts.parts(plan, 6, 8)
    assert holdparts.changes(three, six) == (["slot3", "slot4", "slot5"], [])
    five, _ = holdparts.parts(plan, 5, 8)
    assert holdparts.changes(six, five) == ([], [five["slot5"]])
    assert holdparts.changes(five, five) == ([], [])


def test_a_fixed_hold_is_started_once_and_kept():
    plan = plan_of(100 * GiB, 10 * GiB, fixed=3 * GiB)
    first, kept = holdparts.parts(plan, 2, 8)
    assert kept and list(first) == ["base"] and first["base"].nbytes == 3 * GiB
    for n in range(1, 9):
        assert holdparts.changes(first, holdparts.parts(plan, n, 8)[0]) == ([], [])


def test_a_hold_that_reaches_zero_before_the_last_slot():
    # 55 GiB usable, 10 GiB an instance, 8 slots: 6 instances already leave nothing to hold
    plan = plan_of(55 * GiB, 10 * GiB)
    parts, _ = holdparts.parts(plan, 2, 8)
    assert {k: p.nbytes for k, p in parts.items()} == {
        "slot2": 10 * GiB,
        "slot3": 10 * GiB,
        "slot4": 10 * GiB,
        "slot5": 5 * GiB,
    }
    assert holdparts.total(parts) == plan(2).hold_bytes
    assert holdparts.parts(plan, 6, 8)[0] == {}


@pytest.mark.parametrize(
    "nodes, bound", [(TWO, True), (TWO, False), (CXL, False), (CXL, True)], ids=str
)
def test_per_node_parts_hold_each_nodes_plan(nodes, bound):
    usable, per = 90 * GiB + 12345, 7 * GiB + 999
    plan = plan_of(usable, per, nodes, per_node=True, bound=bound)
    for n in range(0, 9):
        parts, kept = holdparts.parts(plan, n, 8)
        assert kept
        want = by_node(plan(n))
        got = held_by_node(parts)
        for node, nbytes in want.items():
            # a part below 1 MiB is not held: the node's parts miss at most that each
            slack = holdparts.MIN_PART_BYTES * (9 - n)
            assert nbytes - slack <= got.get(node, 0) <= nbytes + slack, (n, node)
        assert all(p.node in want for p in parts.values())


def test_any_walk_of_steps_holds_each_steps_plan_and_changes_only_the_difference():
    plan = plan_of(100 * GiB, 10 * GiB, TWO, per_node=True, bound=True)
    rng = random.Random(7)
    held: dict = {}
    for _ in range(200):
        n = rng.randint(1, 8)
        want, _ = holdparts.parts(plan, n, 8)
        stop, start = holdparts.changes(held, want)
        previous = {k: p for k, p in held.items()}
        for k in stop:
            del held[k]
        held.update({p.key: p for p in start})
        assert held == want
        # a part kept is the same part (its bytes and node), started or stopped no more
        assert set(stop) | {p.key for p in start} == set(previous) ^ set(want)
        assert held_by_node(held) == {k: v for k, v in by_node(plan(n)).items() if v}


def test_a_plan_that_rises_with_the_instances_is_held_whole_and_replaced_each_step():
    def rising(m):
        return HoldPlan(m * GiB)

    three, kept = holdparts.parts(rising, 3, 8)
    assert not kept and three == {"step3": holdparts.Part("step3", 3 * GiB)}
    four, _ = holdparts.parts(rising, 4, 8)
    assert holdparts.changes(three, four) == (["step3"], [four["step4"]])


def test_a_step_outside_the_slots_is_refused():
    with pytest.raises(ValueError, match="outside 0..8"):
        holdparts.parts(plan_of(100 * GiB, 10 * GiB), 9, 8)
