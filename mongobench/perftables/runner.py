"""Runs Performance Tables experiments against one MongoDB URI: the target checked once
(target), its identity and capabilities probed, then every variant (variant.run_variant) in
the run's order, repeats interleaved, rate steps after each. The raw result of each variant
(counts, encoded latency histograms, counters, OS readings) is written to the output file as
soon as the variant ends, so a failure later loses nothing. `mongobench.reports.results`
turns raw results into samples and tables.
"""

from __future__ import annotations

import collections
import dataclasses
import typing

from pymongo.errors import NetworkTimeout, PyMongoError

from mongobench.core import interrupt, redact
from mongobench.core.files import write_json_atomic
from mongobench.perftables import (
    checks,
    coordination,
    identity,
    probe,
    progress,
    quiesce,
    ratesteps,
)
from mongobench.perftables import experiments as exp_mod
from mongobench.perftables.request import PerftablesRun
from mongobench.perftables.result import ABSENT, RESULT_SCHEMA, VariantResult
from mongobench.perftables.target import (
    RUN_SELECTION_MS,
    check_access,
    connect,
    first_use,
    on_this_host,
    reachable,
    reason,
)
from mongobench.perftables.variant import run_variant
from mongobench.remote import provenance


def run(request: PerftablesRun, uri: str, log=print, bar: bool = False, estimate=None) -> dict:
    """Every variant `request` (a validated request.PerftablesRun, for_target `uri`)
    plans; results go to its `out` file after each variant.

    A failed variant is recorded with its error and the run goes on; the
    caller decides how to fail (the CLI exits non-zero). An `[i/N]` line is
    logged as each variant ends, and a heartbeat every 30 s while one runs
    (`bar`: a progress bar too, for a terminal). The request's `reply_timeout`, resolved
    here (see checks.reply_timeout), bounds every wait for the server (every pymongo call gets it
    as socketTimeoutMS, the multiplexed timed phase as its no-reply limit). `repeats`: each
    variant runs that many times, interleaved (see schedule); the samples fold them into a
    mean with its 95 % interval (core.repeats). `auth_retry_s`: see target.first_use.
    `estimate`: the plan's estimate (its metadata: estimated_seconds, estimated_data_mb,
    estimate_rates), kept in the results and on every sample beside the measured figures.
    `rate_steps` (ratesteps.parse): each variant runs closed loop, then in an open loop at
    each step's rate (a curve). `interval_s`: seconds of each variant's per-interval
    figures (see variant.run_variant; 0: none).
    """
    if not request.validated:
        request.validate()
    request = request.for_target(uri, log)
    plans = request.plans  # planned once (validate checked the options)
    rate_steps = request.steps
    database, overrides, client_path = request.database, request.overrides, request.client_path
    bound, bound_from = checks.reply_timeout(uri, request.reply_timeout)
    if bound_from != "uri":  # the URI's own timeoutMS/socketTimeoutMS is what the user asked
        log(f"reply timeout: {bound:g} s ({bound_from}; --reply-timeout or the URI's"
            " socketTimeoutMS/timeoutMS sets it)")  # fmt: skip
    # every variant waits this long for a reply (run_variant)
    resolved = dataclasses.replace(request, reply_timeout=bound)
    max_threads = max((int(v.settings.get("threads", 1)) for _, vs in plans for v in vs), default=1)
    target = redact.uri(uri)
    try:
        # One pooled connection per client thread, or threads queue for connections.
        client = connect(
            uri, maxPoolSize=max(100, max_threads + 10), socketTimeoutMS=int(bound * 1000)
        )
    except (PyMongoError, ValueError) as e:
        raise redact.TargetError(f"{target}: {reason(e, uri)}") from None
    try:
        try:
            kind, version = first_use(client, request.auth_retry_s, log)
            check_access(client, database, uri)
        except PyMongoError as e:
            raise redact.TargetError(f"{target}: {reason(e, uri)}") from None
        shared = on_this_host(client)  # the servers it found (a new client knows none yet)
        if "serverselectiontimeoutms=" not in uri.partition("?")[2].lower():
            client.close()
            client = connect(
                uri,
                maxPoolSize=max(100, max_threads + 10),
                serverSelectionTimeoutMS=RUN_SELECTION_MS,
                socketTimeoutMS=int(bound * 1000),
            )
        server, caps = _probe(client, database, uri, log)
        doc = {
            "schema": RESULT_SCHEMA,
            "tool": "mongobench perftables",
            "scale": str(request.scale),
            "scale_factor": exp_mod.parse_scale(request.scale),
            "database": database,
            "topology": kind,
            "server_version": version,
            "reply_timeout_s": bound,
            "server": server,  # product, its version, backend, the MongoDB it claims
            "capabilities": caps,
            "target": target,
            # a server on this machine: client and server CPU are one (measure.bottleneck)
            "shared_host": shared,
            "client_path": client_path,
            "client_vms": request.client_vms,
            "interval_s": request.interval_s or None,
            "repeats": request.repeats,
            # --set (and the URI's write concern): what `compare` checks runs agree on
            "overrides": {k: overrides[k] for k in sorted(overrides or {})},
            "provenance": provenance.engine(),  # this client's engine, Python, pymongo
            "estimate": dict(estimate or {}),
            **({"rate_steps": [st.name for st in rate_steps]} if rate_steps else {}),
            "results": [],
        }
        out_path, repeats = request.out, request.repeats
        write_json_atomic(out_path, doc)
        order = schedule(plans, repeats)
        runs = len(order) * (1 + len(rate_steps or ()))
        bar_ = progress.terminal_bar(runs) if bar else None
        track = progress.Progress(runs, log, bar=bar_)
        leader = (
            coordination.Leader(client, request.run_id, request.client_vms, on_phase=track.phase)
            if request.client_vms > 1
            else None
        )
        interrupted = False
        try:
            _run_plans(client, resolved, uri, order, doc, _Run(target, track, log, caps, leader))
        except KeyboardInterrupt as e:  # the partial results are written; the caller says so
            e.run, interrupted = doc, True
            raise
        finally:
            track.close()
            if leader is not None:
                # Interrupted: tell the followers, do not wait for them (PKB stops them)
                leader.finish(timeout=0.0 if interrupted else 30.0)
        return doc
    finally:
        client.close()


def schedule(plans, repeats: int = 1) -> list[tuple]:
    """(experiment, variant, repeat) in run order. With repeats, every variant runs once per
    round and the rounds alternate direction (a b c, c b a, a b c): a drift over the run
    (a warming cache, a filling disk, a noisy neighbour) does not favour the early ones."""
    flat = [(e, v) for e, vs in plans for v in vs]
    out = []
    for r in range(repeats):
        out += [(e, v, r) for e, v in (flat if r % 2 == 0 else reversed(flat))]
    return out


def _probe(client, database: str, uri: str, log) -> tuple[dict, dict]:
    """The server's identity and capabilities (probe), said once in the log."""
    answers = probe.gather(client)
    server = probe.server_identity(client, answers)
    caps = probe.capabilities(client, database, answers, uri)
    if server["server_product"] == "FerretDB" and caps.get("backend"):
        server["server_backend"] = caps["backend"]
    caps.pop("explain", None)
    log(f"server: {identity.describe(server)}")
    if caps.get("lacks"):
        log(f"server lacks: {', '.join(caps['lacks'])} (variants that need them are n/a)")
    return server, caps


class _Run(typing.NamedTuple):
    """What every variant of a run shares besides its request: the redacted target, the
    progress, the log, the server's capabilities (probe) and the coordination leader."""

    target: str
    track: progress.Progress
    log: typing.Callable
    caps: dict | None
    leader: coordination.Leader | None


def _run_plans(client, request: PerftablesRun, uri: str, order, doc, run: _Run):
    """The variants in `order` (see schedule); each result is written as soon as it
    exists. A variant that needs a feature the server lacks (`run.caps`, see probe) is n/a,
    not run. The request's rate steps: after each variant, its open-loop steps at the rates
    its closed-loop throughput gives."""
    target, track, log, caps = run.target, run.track, run.log, run.caps
    repeats, out_path, steps = request.repeats, request.out, request.steps
    gone = None  # why the server cannot be reached any more
    ran = None  # the last variant that ran: the next one waits until its work is done
    done = []  # VariantResults in run order: doc["results"] holds their dicts

    def write():
        doc["results"] = [r.to_dict() for r in done]
        write_json_atomic(out_path, doc)

    queue = collections.deque((e, v, r, 0, None) for e, v, r in order)
    while queue:
        experiment, v, r, step, closed = queue.popleft()
        name = f"{experiment.name}/{v.label}"
        track.begin(name if repeats == 1 else f"{name} (repeat {r + 1}/{repeats})")
        missing = probe.lacking(v.settings, caps)
        if gone:
            res = _failed(experiment, v, f"not run: {gone}")
            track.end(res.error)
        elif missing:
            res = _not_applicable(experiment, v, f"server lacks {', '.join(missing)}")
            track.end(f"n/a ({res.reason})")
        else:
            quiet = _quiet(client, request.database, ran, request.reply_timeout, name, log)
            ran = {}
            log(track.line("running"))
            try:
                ran = res = run_variant(
                    client, experiment, v, request, uri, log, track.phase, run.leader
                )
                summary = _one_line(res)
                if not res.acknowledged:
                    # Nothing was acknowledged: there is no measurement, only errors.
                    res.status, res.error = "failed", redact.text(_nothing_acknowledged(res), uri)
                    summary = f"FAILED {res.error}"
            except NetworkTimeout:  # a stuck server: one line, the bound named
                why = (
                    f"no reply from the server in {request.reply_timeout:g} s (the reply timeout:"
                    f" --reply-timeout or the URI's socketTimeoutMS) during {track.current_phase}"
                )
                res = _failed(experiment, v, redact.text(why, uri))
                summary = f"FAILED {res.error}"
            except Exception as e:  # noqa: BLE001 - recorded, reported, fails the run
                res = _failed(experiment, v, redact.text(f"{type(e).__name__}: {e}", uri))
                summary = f"FAILED {res.error}"
            except KeyboardInterrupt as e:  # SIGTERM or SIGINT: kept, marked, and stop
                sig = interrupt.of(e)
                res = _failed(experiment, v, f"interrupted by {sig.name}")
                res.interrupted, res.fails_run = sig.name, res.error
                if repeats > 1:
                    res.repeat, res.repeats = r, repeats
                done.append(res)
                doc["interrupted"] = f"{sig.name} during {experiment.name} [{v.label}]"
                write()
                track.end(f"INTERRUPTED by {sig.name}")
                raise sig from None
            track.end(summary)
            if quiet is not None:
                res.quiesce = quiet
        if repeats > 1:
            res.repeat, res.repeats = r, repeats
        if steps:
            queue.extendleft(reversed(_rate_steps(experiment, v, r, step, closed, res, steps, log)))
        too_many = _error_share(res)
        if too_many:
            res.fails_run = too_many
        done.append(res)
        write()
        if not gone and (res.status == "failed" or res.had_errors):
            why = res.server_lost or reachable(client)
            if why:
                gone = f"{target}: {why} (after {experiment.name} [{v.label}])"
                doc["unreachable"] = gone
                if res.status == "ok":  # a fragment measured before the server went
                    res.fails_run = f"the server was lost during this variant: {why}"
                write()


def _rate_steps(experiment, v, r, step, closed, res, steps, log) -> list[tuple]:
    """Marks `res` with its rate step; after a closed-loop result (step 0), the queue
    entries of its open-loop steps (none when it gave no throughput to step from)."""
    if step:
        res.rate_step = ratesteps.step_record(step, steps, closed)
        return []
    closed = ratesteps.closed_loop_rate(res.to_dict())
    res.rate_step = ratesteps.step_record(0, steps, closed)
    if closed is None:
        if res.status != "n/a":
            log(f"rate steps of {experiment.name} [{v.label}] not run: its closed loop"
                " measured no throughput")  # fmt: skip
        return []
    return [
        (experiment, ratesteps.step_variant(v, st, closed), r, i, closed)
        for i, st in enumerate(steps, 1)
    ]


def _quiet(client, database, ran, bound, name, log) -> dict | None:
    """Before a variant: wait until the previous one's work is done on the server (quiesce),
    at most `bound` (the reply timeout); None before the first variant."""
    if ran is None:
        return None
    limit = getattr(ran, "connections_before", None)  # ran: {} when it raised
    limit = None if limit is ABSENT else limit
    if limit is not None and ran.client_path != "multiplexed":
        limit += int(ran.threads or 0)  # the pymongo path's connections stay pooled
    q = quiesce.wait(client, database, bound, limit)
    msg = quiesce.line(q, bound, name)
    if msg:
        log(msg)
    return q


# A variant with a larger share of failed operations fails the run (its figures are kept,
# marked): they describe a troubled server, not its speed.
ERROR_SHARE_LIMIT = 0.01


def _error_share(res: VariantResult) -> str | None:
    if res.status != "ok":
        return None
    errors = sum((res.errors or {}).values())
    total = errors + res.acknowledged
    if not total or errors / total <= ERROR_SHARE_LIMIT:
        return None
    return (
        f"{errors} of {total} operations failed ({errors / total:.1%},"
        f" more than {ERROR_SHARE_LIMIT:.0%})"
    )


def _failed(experiment, variant, error: str) -> VariantResult:
    return _unmeasured("failed", experiment, variant, error=error)


def _not_applicable(experiment, variant, why: str) -> VariantResult:
    """A variant the server cannot run: reported `n/a (why)`, never FAILED."""
    return _unmeasured("n/a", experiment, variant, reason=why)


def _unmeasured(status, experiment, variant, **why) -> VariantResult:
    return VariantResult(
        status=status,
        experiment=experiment.name,
        label=variant.label,
        variant_index=variant.index,
        params=variant.params,
        settings=variant.settings,
        **why,
    )


def _nothing_acknowledged(res: VariantResult) -> str:
    errors = res.errors or {}
    if not errors:
        return "no operation was acknowledged (and none failed: nothing was measured)"
    kinds = "; ".join(f"{k}={n}" for k, n in sorted(errors.items()))
    sample = next(iter((res.error_samples or {}).values()), "")
    return (
        f"no operation was acknowledged; {sum(errors.values())} failed ({kinds})"
        + (f": {sample}" if sample else "")
    )[:1000]


def _one_line(res: VariantResult) -> str:
    ops = res.acknowledged
    errors = sum(res.errors.values())
    ol = res.open_loop
    offered = (
        f", {ol['achieved_ops_per_s']:.0f} of {ol['target_ops_per_s']:g} ops/s offered"
        if ol
        else ""
    )
    return (
        f"{ops} ops, {res.docs} docs in {res.duration_s:.2f}s "
        f"({res.docs / max(res.duration_s, 1e-9):.0f} docs/s), {errors} errors{offered}"
    )
