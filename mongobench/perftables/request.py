"""One Performance Tables run, as a typed request: every run option declared once.

`perftables run`'s flags build a `PerftablesRun`; `perftables run --request run.json`
reads one (PKB's benchmark writes it beside `target.uri` on the client VM instead of a
long command line). `validate()` checks it once, before anything touches the target, in
one line naming the option (the flag or the JSON key) and the value; `plan()` loads and
plans the experiments once. The runner takes the object (runner.run, variant.run_variant).
The target is not in the request: its connection string stays in its file.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field

from mongobench.core import files, names
from mongobench.core import request as core_request
from mongobench.core import series as series_mod
from mongobench.perftables import checks, ratesteps
from mongobench.perftables import experiments as exp_mod
from mongobench.perftables.checks import CLIENT_PATHS

# How each surface names an option in its one-line errors: the CLI's flags, PKB's flags,
# a request file's keys (request_key).
CLI_FLAGS = {
    "overrides": "--set",
    "experiments_file": "--experiments-file",
    "os_path": "--os-path",
    "max_seconds": "--max-seconds",
    "reply_timeout": "--reply-timeout",
    "interval_s": "--interval-s",
    "client_path": "--client-path",
    "client_vms": "--client-vms",
    "run_id": "--run-id",
    "rate_steps": "--rate-steps",
    "auth_retry_s": "--auth-retry-s",
}


def cli_flag(name: str) -> str:
    """The `perftables run` flag of field `name`."""
    return CLI_FLAGS.get(name, "--" + name.replace("_", "-"))


request_key = core_request.request_key


class RequestError(core_request.RequestError, exp_mod.ExperimentError):
    """A request that cannot run: one line naming the option and the value."""


@dataclass(frozen=True)
class PerftablesRun(core_request.Named):
    """Everything one `perftables run` is asked to do (not the target, not the estimate's
    rate table, not the terminal's progress bar)."""

    default_name = staticmethod(cli_flag)  # the CLI's flags, until validated

    experiments: list[str] | None = None  # names; None: all
    scale: str = "smoke"  # exp_mod.SCALES or a factor in (0, 1]
    experiments_file: str | None = None  # None: the packaged perftables.yaml
    variants: list[str] | None = None  # labels; None: all
    skip: str | None = None  # 'experiment/label;experiment/label'
    database: str = "mongobench"
    overrides: dict = field(default_factory=dict)  # --set, typed by the settings schema
    out: str = "perftables-results.json"  # raw results, rewritten after every variant
    samples: str | None = None  # the samples too
    os_path: str | None = None  # the disk whose OS metrics are sampled; 'none': off
    max_seconds: float | None = None  # cap on each timed phase
    reply_timeout: float | None = None  # None: the URI's, else the runner's default
    interval_s: float = series_mod.DEFAULT_INTERVAL_S  # 0: no time series
    client_path: str = "multiplexed"
    processes: int | None = None  # None: this machine's CPUs
    client_vms: int = 1
    run_id: str | None = None  # with client_vms > 1
    repeats: int = 1
    rate_steps: str | None = None  # ratesteps.parse's text
    auth_retry_s: float = 0.0

    def __post_init__(self):
        if self.overrides is None:  # none given
            object.__setattr__(self, "overrides", {})

    # -- serialisation -------------------------------------------------------------

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=1, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str, source: str = "request") -> PerftablesRun:
        """The request in `text` (an object of this class's keys; an unknown key is refused,
        a missing one takes its default), type-checked, not yet validated."""
        request = core_request.from_json(cls, text, source, RequestError)
        request.check_types(request_key(source))
        return request

    @classmethod
    def read(cls, path: str) -> PerftablesRun:
        """The request file `path`, checked (validate) with its keys named in errors."""
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except (OSError, UnicodeDecodeError) as e:
            why = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
            raise RequestError(f"--request {path}: {why}") from None
        return cls.from_json(text, path).validate(request_key(path))

    def write(self, path: str) -> None:
        files.write_text(path, self.to_json())

    # -- validation ----------------------------------------------------------------

    def check_types(self, name: Callable[[str], str] = cli_flag) -> None:
        """Each field of the type it is declared with (a request file may hold anything)."""
        core_request.check_types(self, name, RequestError)
        for key in ("experiments", "variants"):
            value = getattr(self, key)
            if value is not None and not all(isinstance(v, str) and v for v in value):
                raise RequestError(f"{name(key)}: {value!r} is not a list of names")

    def validate(self, name: Callable[[str], str] = cli_flag) -> PerftablesRun:
        """Self, when every option can run; else a RequestError (a ValueError) naming the
        option by `name` (cli_flag, PKB's flags, request_key) and the value. Reads no
        experiment file (see plan) and touches no target."""
        self.check_types(name)
        try:
            exp_mod.parse_scale(self.scale)
        except exp_mod.ExperimentError as e:
            raise RequestError(f"{name('scale')}: {e}") from None
        if self.experiments is not None and not self.experiments:
            raise RequestError(f"{name('experiments')}: empty; leave it out for all")
        try:
            names.check_database(self.database, name("database"))
            files.check_output(self.out, name("out"), rewritten=True)
            if self.samples:
                files.check_output(self.samples, name("samples"))
            exp_mod.check_overrides(self.overrides, name("overrides"))
            ratesteps.parse(self.rate_steps, name("rate_steps"))
        except exp_mod.ExperimentError as e:
            raise RequestError(str(e)) from None
        except ValueError as e:  # names, files (OutputError)
            raise RequestError(str(e)) from None
        if self.os_path not in (None, "none") and not os.path.exists(self.os_path):
            raise RequestError(f"{name('os_path')} {self.os_path}: no such file or directory")
        for key in ("max_seconds", "reply_timeout"):
            value = getattr(self, key)
            if value is not None and not 0 < value < math.inf:
                raise RequestError(f"{name(key)} must be > 0 seconds, not {value:g}")
        if not 0 <= self.interval_s < math.inf:
            raise RequestError(
                f"{name('interval_s')}: must be a number of seconds >= 0, not {self.interval_s!r}"
            )
        if not 0 <= self.auth_retry_s < math.inf:
            raise RequestError(
                f"{name('auth_retry_s')}: must be a number of seconds >= 0,"
                f" not {self.auth_retry_s!r}"
            )
        for key in ("processes", "client_vms", "repeats"):
            value = getattr(self, key)
            if value is not None and value < 1:
                raise RequestError(f"{name(key)}: must be a whole number >= 1, not {value!r}")
        if self.client_path not in CLIENT_PATHS:
            raise RequestError(
                f"{name('client_path')}: must be one of {', '.join(CLIENT_PATHS)},"
                f" not {self.client_path!r}"
            )
        if self.client_vms > 1 and (self.client_path != "multiplexed" or not self.run_id):
            raise RequestError(
                f"{name('client_vms')} {self.client_vms}: several client VMs need"
                f" {name('client_path')} multiplexed and {name('run_id')}"
            )
        self._named(name)  # plans names the options the same way
        return self

    # -- what runs -----------------------------------------------------------------

    @property
    def steps(self) -> list | None:
        """The rate steps (ratesteps.Step), or None."""
        return ratesteps.parse(self.rate_steps, self._name("rate_steps"))

    @property
    def sampler_path(self) -> str | bool | None:
        """os_path as the OS sampler takes it: False (off), None (its default) or a path."""
        return False if self.os_path == "none" else self.os_path

    @property
    def runs(self) -> int:
        """Timed runs of each planned variant: repeats, each closed loop then each rate step."""
        return self.repeats * (1 + len(self.steps or ()))

    @functools.cached_property
    def catalog(self) -> dict:
        """The experiment file, loaded once per request."""
        return exp_mod.load(self.experiments_file or exp_mod.PERFTABLES_FILE)

    @functools.cached_property
    def plans(self) -> list[tuple]:
        """[(Experiment, [Variant])]: the experiment file loaded and planned, once per
        request, and every check that needs the plan (open loops, rate steps)."""
        plans = exp_mod.plan(
            self.catalog, self.experiments, self.scale, self.variants, self.overrides, self.skip
        )
        path_flag = self._name("client_path")
        checks.check_open_loop(plans, self.client_path, path_flag)
        checks.check_rate_steps(
            plans, self.steps, self.client_path, self._name("rate_steps"), path_flag
        )
        return plans

    def for_target(self, uri: str, log=print) -> PerftablesRun:
        """This request against `uri`: the URI's write concern joins the overrides (see
        checks.uri_write_concern; said in the log). Plan the copy, not self."""
        if getattr(self, "_target", None) == uri:
            return self  # done once (the CLI plans it; the runner may be given either)
        overrides = checks.uri_write_concern(uri, self.overrides, log)
        new = self if overrides == self.overrides else self.replace(overrides=overrides)
        object.__setattr__(new, "_target", uri)
        return new

    def planned_runs(self) -> int:
        """Results a complete run writes: every planned variant, `runs` times."""
        return sum(len(vs) for _, vs in self.plans) * self.runs
