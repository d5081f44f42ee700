"""The compiled loop in tests: its module, or a failure saying why it is missing (scripts/setup
builds it; a test that needs it never skips); and a compiled source driven beside its Python
twin with scripted outcomes."""

import time

import pytest

from mongobench.driver import multiplex, native
from mongobench.driver.base import ThreadStats


def compiled():
    """The compiled module (driver.native), or fails the test."""
    module = native.module()
    if module is None:
        pytest.fail("the compiled loop is not built here (scripts/setup builds it)")
    return module


def drive(gen, run, outcomes):
    """Every request the source yields (bytes) and its check, answered by `outcomes` in
    turn (each after 1 ms: its latency) until the source ends."""
    sent = []
    try:
        req, check = next(gen)
        for out in outcomes:
            sent.append((bytes(req), check))
            run.now = time.perf_counter() + 0.001
            req, check = gen.send(out)
        sent.append((bytes(req), check))
    except StopIteration:
        pass
    return sent


def twins(source, module, index: int, total, outcomes) -> tuple:
    """The Python source and its compiled twin, client `index` of 3 with quota `total`, each
    driven by `outcomes`: ((requests, stats) of the Python one, the same of the twin)."""
    got = []
    for twin in (False, True):
        run, stats = multiplex.Run(), ThreadStats()
        c = multiplex.Client(index, 3, run, stats, total=total)
        gen = source.compiled(c, module) if twin else source(c)
        got.append((drive(gen, run, outcomes), stats))
    return tuple(got)


def latencies(stats) -> dict:
    return {op: dict(c) for op, c in stats.latency._pending.items()}
