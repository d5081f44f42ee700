"""The YCSB property files of a sweep's phases: one per phase at one size, or one per client
VM's process when the phase is split over several (a load's key range, a run's operations).
"""

from __future__ import annotations

from collections.abc import Sequence

from mongobench.core import split
from mongobench.sweep.plan import DEFAULT_TABLE, DISTRIBUTION, Phase, SizeStep, SweepError
from mongobench.sweep.request import SweepRun
from mongobench.ycsb import properties as ycsb
from mongobench.ycsb.properties import FIELD_COUNT, FIELD_LENGTH


def phase_properties(
    step: SizeStep,
    phase: Phase,
    request: SweepRun,
    urlfile: str,
    *,
    share: int | None = None,
    start: int = 0,
    histogram_prefix: str | None = None,
) -> str:
    """The YCSB property file of one phase at one size, as `request` asks (threads, cap,
    load batch size, collection, status interval); the URI only through `urlfile`.

    One process does it all by default; with `share`, a load process inserts its own key
    range [start, start + share) and a run process does `share` operations (see
    `process_properties`)."""
    loading = phase.ycsb_phase == "load"
    if share is None:
        operationcount = step.records if loading else step.operations
    else:
        operationcount = share
    keys = {"insertstart": start, "insertcount": share} if loading and share else {}
    return ycsb.Workload(
        recordcount=step.records,
        operationcount=operationcount,
        **keys,
        histogram_prefix=histogram_prefix,
        readproportion=phase.read,
        updateproportion=phase.update,
        insertproportion=phase.insert,
        requestdistribution=DISTRIBUTION,
        fieldcount=FIELD_COUNT,
        fieldlength=FIELD_LENGTH,
        threadcount=request.threads,
        percentiles=ycsb.DEFAULT_PERCENTILES,
        urlfile=urlfile,
        maxexecutiontime=request.max_seconds,
        batchsize=request.load_batchsize if loading else None,
        status_interval_s=request.status_interval_s,
        extra={"table": request.table} if request.table != DEFAULT_TABLE else None,
    ).text()


def process_properties(
    step: SizeStep,
    phase: Phase,
    request: SweepRun,
    urlfiles: Sequence[str],
    histogram_prefixes: Sequence[str] | None = None,
) -> list[str]:
    """Property files of the YCSB processes (one per client VM, one per entry of
    `urlfiles`: the URI file's path on that VM) sharing one phase: a load splits the key
    range, a run splits the operations over all keys. Processes whose share would be empty
    are left out, so the list may be shorter; empty shares are always the last ones. With
    several processes, `histogram_prefixes` (one per process) turn on HdrHistogram logs so
    percentiles can be merged exactly (`combine`)."""
    processes = len(urlfiles)
    if processes < 1:
        raise SweepError("at least one YCSB process is needed")
    if processes == 1:
        prefix = histogram_prefixes[0] if histogram_prefixes else None
        return [phase_properties(step, phase, request, urlfiles[0], histogram_prefix=prefix)]
    total = step.records if phase.ycsb_phase == "load" else step.operations
    out, start = [], 0
    for i, share in enumerate(split.split_evenly(total, processes)):
        if share == 0:
            continue
        prefix = histogram_prefixes[i] if histogram_prefixes else None
        out.append(
            phase_properties(
                step,
                phase,
                request,
                urlfiles[i],
                share=share,
                start=start,
                histogram_prefix=prefix,
            )
        )
        start += share
    return out
