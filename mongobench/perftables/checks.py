"""The checks a Performance Tables run makes before anything runs, shared by the run request
(request.PerftablesRun, which validates once) and the runner: the reply timeout, the URI's
write concern, the client path of a variant's timed phase, open loops and rate steps."""

from __future__ import annotations

from pymongo.errors import PyMongoError

from mongobench.driver import connection, sources
from mongobench.perftables import experiments as exp_mod
from mongobench.perftables import ratesteps

# How long any call waits for the server's reply when neither --reply-timeout nor the URI's
# timeoutMS/socketTimeoutMS says: every control-path command (prepare, serverStatus, finish)
# and the multiplexed timed phase's "no reply from any client" limit. Long enough for a slow
# server's index build or 2 MB batch, short enough that a stuck server fails its variant.
DEFAULT_REPLY_TIMEOUT_S = 300.0


def reply_timeout(uri: str, given: float | None = None) -> tuple[float, str]:
    """(seconds, where from): `given` (the flag), else the URI's timeoutMS, else its
    socketTimeoutMS, else DEFAULT_REPLY_TIMEOUT_S."""
    if given is not None:
        if not given > 0:
            raise exp_mod.ExperimentError(f"reply timeout must be > 0 seconds, not {given}")
        return float(given), "flag"
    try:
        from_uri = connection.options(uri).reply_timeout
    except (connection.WireError, ValueError, PyMongoError):
        from_uri = None  # a bad URI fails at connect, in its own words
    if from_uri:
        return from_uri, "uri"
    return DEFAULT_REPLY_TIMEOUT_S, "default"


def uri_write_concern(uri: str, overrides: dict | None, log=print) -> dict:
    """The URI's `w`, when it has one, replaces the experiments' write concern: what a user
    sets is what runs. An explicit --set write_concern still wins, and both are said."""
    overrides = dict(overrides or {})
    w = connection.options(uri).write_concern
    if not w or "w" not in w:
        return overrides
    if "write_concern" in overrides:
        if str(overrides["write_concern"]) != str(w["w"]):
            log(f"write concern: --set write_concern={overrides['write_concern']} wins over the"
                f" URI's w={w['w']}")  # fmt: skip
        return overrides
    log(f"write concern: the URI's w={w['w']} replaces the experiments' own")
    overrides["write_concern"] = w["w"]
    return overrides


CLIENT_PATHS = ("multiplexed", "pymongo")


def timed_path(workload: str, settings: dict, client_path: str = "multiplexed") -> str:
    """Which client runs a variant's timed phase: `pipelined` (kv_read_update's
    harness-cost experiment, its own threads), `pymongo` (the reference path, one
    thread per client in this process) or `multiplexed` (virtual clients on event
    loops over several processes: driver.procs)."""
    if client_path not in CLIENT_PATHS:
        raise exp_mod.ExperimentError(
            f"client path must be one of {', '.join(CLIENT_PATHS)}, not {client_path!r}"
        )
    if settings.get("driver") == "pipelined":
        return "pipelined"
    if client_path == "pymongo" or workload not in sources.SOURCES:
        return "pymongo"
    return "multiplexed"


def check_open_loop(plans, client_path: str = "multiplexed", path_flag="--client-path") -> None:
    """Refuses, before anything runs, an open-loop variant (`target_ops_per_s`) whose timed
    phase would not run on the multiplexed driver: only its event loops keep a schedule
    (the pymongo reference path and the pipelined harness-cost threads are closed loops).
    `path_flag`: the flag the message names (PKB's or the CLI's)."""
    for experiment, variants in plans:
        for v in variants:
            rate = v.settings.get("target_ops_per_s")
            path = timed_path(experiment.workload, v.settings, client_path)
            if rate and path != "multiplexed":
                why = (
                    f"{path_flag} pymongo is a closed loop only"
                    if client_path == "pymongo"
                    else f"its timed phase runs on the {path} client, a closed loop only"
                )
                raise exp_mod.ExperimentError(
                    f"target_ops_per_s={rate:g} in {experiment.name} [{v.label}]: {why};"
                    " the open loop runs on the multiplexed client path"
                )


def check_rate_steps(
    plans, steps, client_path="multiplexed", steps_flag="--rate-steps", path_flag="--client-path"
) -> None:
    """Refuses, before anything runs, rate steps (see ratesteps) for variants that are not
    one operation at a time, or whose timed phase has no open loop."""
    if not steps:
        return
    if client_path != "multiplexed":
        raise exp_mod.ExperimentError(
            f"{steps_flag} runs open loops, on the multiplexed client path only, not"
            f" {path_flag} {client_path}"
        )
    ratesteps.check(plans, steps_flag)
    check_open_loop(
        [(e, [ratesteps.step_variant(v, steps[0], 1.0) for v in vs]) for e, vs in plans],
        client_path,
        path_flag,
    )
