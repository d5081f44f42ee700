"""Experiments declared as data: shared settings plus variants that override them.

`experiments/perftables.yaml` holds every experiment of the Performance Tables;
this module loads it, validates it, and resolves a scale into the concrete
settings each variant runs with. Pure functions: no server, no PKB.
"""

from __future__ import annotations

import copy
import math
import pathlib
from dataclasses import dataclass, field

import yaml

from mongobench.core.pairs import parse_pairs
from mongobench.driver.catalog import WORKLOADS

PERFTABLES_FILE = pathlib.Path(__file__).resolve().parents[1] / "experiments" / "perftables.yaml"

# Named scales: the factor applied to every setting an experiment lists under
# `scaled`. "full" is the seed's size (24 GB loads); "smoke" runs in seconds.
SCALES = {"full": 1.0, "tenth": 0.1, "hundredth": 0.01, "small": 1e-3, "smoke": 1.2e-4}


# A setting's real value when the scale changed it (Workload.ran_as): `ran_as_batch_size`.
RAN_AS = "ran_as_"
# A scaled label key's full-scale value, which its label names (`nominal_doc_range`).
NOMINAL = "nominal_"


def ran_as_text(settings: dict, key: str, value) -> str:
    """`1000 (ran as 16)` when the scale made setting `key` run as another value."""
    real = settings.get(f"{RAN_AS}{key}")
    return f"{value} (ran as {real})" if real is not None else f"{value}"


class ExperimentError(ValueError):
    """A bad experiment file, experiment name, variant or scale."""


@dataclass
class Variant:
    experiment: str
    index: int
    label: str
    params: dict  # the variant's own overrides (its identity in tables)
    settings: dict  # every setting, scaled: what actually runs; and key_example
    base_label: str = ""  # the label without the user's overrides (--variants takes both)

    def __post_init__(self):
        self.base_label = self.base_label or self.label


@dataclass
class Experiment:
    name: str
    title: str
    section: str
    workload: str
    label: list[str]
    settings: dict
    variants: list[dict]
    scaled: dict = field(default_factory=dict)  # setting -> minimum after scaling
    layout: dict = field(default_factory=dict)  # the tables' (mongobench.reports.layout)
    description: str = ""
    requires: list[str] = field(default_factory=list)
    deviations: dict = field(default_factory=dict)  # what differs from the seed -> why

    def resolve(self, scale: float | str, overrides: dict | None = None) -> list[Variant]:
        """Concrete variants at `scale`: shared settings < the variant's < `overrides`
        (the user's value wins). The scale applies to the experiment's values, never to
        a value the user set: what a user sets is what runs. Variants an override makes
        identical (e.g. batch_size=7 in insert_batchsize) run once. When an override of a
        label key gives several different variants one label (doc_size_kb=8 in
        insert_docsize: five volumes), each label says which variant it was, as
        `8 (variant 1)`. Each variant's settings end with `key_example`: one `_id` its
        operations address, as mongosh shows it."""
        factor = parse_scale(scale)
        overrides = overrides or {}
        out = []
        for i, params in enumerate(self.variants):
            settings = copy.deepcopy(self.settings)
            settings.update(params)
            # Labels name the full-scale variant, so they match across scales.
            base = ", ".join(str(settings.get(k)) for k in self.label)
            settings.update(overrides)
            label = ", ".join(str(settings.get(k)) for k in self.label)
            for key, minimum in self.scaled.items():
                if key in settings and settings[key] is not None and key not in overrides:
                    settings[key] = _scale_value(settings[key], factor, minimum)
            if any(v.settings == settings for v in out):
                continue
            out.append(Variant(self.name, i, label, dict(params), settings, base))
        for v in out:
            if v.label != v.base_label and sum(w.label == v.label for w in out) > 1:
                v.label = f"{v.label} (variant {v.base_label})"
        for v in out:
            # a label key the scale changed (update_fields' key range 500000 runs as 60 at
            # smoke): the label names the full-scale value, the tables say what ran
            asked = {**self.settings, **self.variants[v.index], **overrides}
            for key in self.label:
                if key in self.scaled and v.settings.get(key) != asked.get(key):
                    v.settings[f"{RAN_AS}{key}"] = v.settings[key]
                    v.settings[f"{NOMINAL}{key}"] = asked.get(key)
        workload = WORKLOADS.get(self.workload)
        for v in out if workload is not None else ():
            try:
                v.settings["key_example"] = workload.key_example(v.settings)
                # what the scale really made of a setting: `1000 (ran as 16)` in tables
                for key, real in workload.ran_as(v.settings).items():
                    v.settings[f"{RAN_AS}{key}"] = real
            except (KeyError, ValueError) as e:
                raise ExperimentError(f"experiment {self.name} [{v.label}]: {e!r}") from None
        return out


def parse_scale(scale: float | str) -> float:
    if isinstance(scale, str):
        if scale in SCALES:
            return SCALES[scale]
        try:
            scale = float(scale)
        except ValueError:
            raise ExperimentError(
                f"scale must be one of {', '.join(SCALES)} or a number in (0, 1], not {scale!r}"
            ) from None
    if not 0 < scale <= 1:
        raise ExperimentError(f"scale must be in (0, 1], not {scale}")
    return float(scale)


def _scale_value(value, factor, minimum):
    scaled = value * factor
    if isinstance(value, int) and isinstance(minimum, int):
        scaled = math.ceil(scaled)
    return max(minimum, scaled)


_REQUIRED = ("title", "section", "workload", "label", "settings", "variants")


def load(path: pathlib.Path | str = PERFTABLES_FILE) -> dict[str, Experiment]:
    try:
        with open(path) as f:
            doc = yaml.safe_load(f)
    except OSError as e:
        raise ExperimentError(f"experiments file {path}: {e.strerror}") from None
    except yaml.YAMLError as e:
        where = getattr(e, "problem_mark", None)
        at = f" (line {where.line + 1}, column {where.column + 1})" if where else ""
        raise ExperimentError(f"experiments file {path}: not valid YAML{at}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("experiments"), dict):
        raise ExperimentError(f"{path}: no 'experiments' mapping")
    out = {}
    for name, spec in doc["experiments"].items():
        if not isinstance(spec, dict):
            raise ExperimentError(f"{path}: experiment {name} is not a mapping")
        missing = [k for k in _REQUIRED if k not in spec]
        if missing:
            raise ExperimentError(f"{path}: experiment {name} lacks {', '.join(missing)}")
        label = spec["label"] if isinstance(spec["label"], list) else [spec["label"]]
        if not spec["variants"]:
            raise ExperimentError(f"{path}: experiment {name} has no variants")
        deviations = spec.get("deviations") or {}
        if not isinstance(deviations, dict) or not all(
            isinstance(v, str) and v.strip() for v in deviations.values()
        ):
            raise ExperimentError(f"{path}: experiment {name}: deviations map a topic to why")
        out[name] = Experiment(
            name=name,
            title=spec["title"],
            section=spec["section"],
            workload=spec["workload"],
            label=label,
            settings=dict(spec["settings"]),
            variants=[dict(v) for v in spec["variants"]],
            scaled=dict(spec.get("scaled", {})),
            layout=dict(spec.get("layout") or {}),
            description=spec.get("description", "").strip(),
            requires=list(spec.get("requires", [])),
            deviations={str(k): " ".join(v.split()) for k, v in deviations.items()},
        )
    return out


def listing(experiments: dict[str, Experiment], scale: float | str = "full") -> dict:
    """Every experiment with its variants' resolved settings at `scale` (the settings
    under the names the engine uses: preload_docs, total_docs, doc_size_kb,
    batch_size, threads, group_size, total_ops, ...), what differs from the seed and
    why: `mongobench perftables list --format json`."""
    return {
        "scale": str(scale),
        "scale_factor": parse_scale(scale),
        "experiments": [
            {
                "name": e.name,
                "title": e.title,
                "section": e.section,
                "workload": e.workload,
                "label": e.label,
                "description": e.description,
                "deviations": e.deviations,
                "variants": [
                    {"index": v.index, "label": v.label, "params": v.params, "settings": v.settings}
                    for v in e.resolve(scale)
                ],
            }
            for e in experiments.values()
        ],
    }


def split_list(value: str | None, option: str, sep: str = ",") -> list[str] | None:
    """A list option: None when not given; its items when given; an option given with no
    item (`--experiments ''`) is refused rather than read as "all"."""
    if value is None:
        return None
    items = [v.strip() for v in value.split(sep) if v.strip()]
    if not items:
        raise ExperimentError(f"{option}: empty list; leave the option out for the default")
    return items


def select(experiments: dict[str, Experiment], names: list[str] | None) -> list[Experiment]:
    """Experiments by name in file order; all when `names` is None or ['all']; an empty
    list is an error (an empty option must not mean "all")."""
    if names is not None and not [n for n in names if n.strip()]:
        raise ExperimentError("no experiment given (an empty list); leave it out for all")
    if names is None or names == ["all"]:
        return list(experiments.values())
    unknown = [n for n in names if n not in experiments]
    if unknown:
        raise ExperimentError(
            f"unknown experiment(s) {', '.join(unknown)}; known: {', '.join(experiments)}"
        )
    return [experiments[n] for n in names]


def filter_variants(variants: list[Variant], wanted: list[str] | None) -> list[Variant]:
    """Keep variants whose label is in `wanted` (all when None)."""
    if wanted is None:
        return variants
    return [v for v in variants if v.label in wanted or v.base_label in wanted]


def parse_skip(spec: str | None) -> set[tuple[str, str]]:
    """`experiment/label;experiment/label` (labels may contain commas) -> pairs."""
    out = set()
    if spec is not None and not spec.replace(";", "").strip():
        raise ExperimentError("skip: empty list; leave it out to skip nothing")
    for item in (spec or "").split(";"):
        item = item.strip()
        if not item:
            continue
        experiment, sep, label = item.partition("/")
        if not sep or not experiment or not label:
            raise ExperimentError(f"skip entries look like experiment/variant label, not {item!r}")
        out.add((experiment.strip(), label.strip()))
    return out


def plan(
    experiments: dict[str, Experiment],
    names: list[str] | None,
    scale: float | str,
    variants: list[str] | None = None,
    overrides: dict | None = None,
    skip: str | None = None,
) -> list[tuple[Experiment, list[Variant]]]:
    """The experiments and variants a run executes, validated up front.

    A skip entry of an experiment not selected is ignored (one skip list serves
    every selection); an entry whose experiment or label exists nowhere is an error.
    """
    check_overrides(overrides)
    skipped = parse_skip(skip)
    chosen = select(experiments, names)
    everywhere = {
        (e.name, v.label) for e in experiments.values() for v in e.resolve(scale, overrides)
    }
    unknown = sorted(f"{e}/{v}" for e, v in skipped - everywhere)
    if unknown:
        raise ExperimentError(f"skip names unknown variant(s): {'; '.join(unknown)}")
    if variants is not None:
        if not variants:
            raise ExperimentError("no variant given (an empty list); leave it out for all")
        known = {e.name: e.resolve(scale, overrides) for e in chosen}
        labels = {lab for vs in known.values() for v in vs for lab in (v.label, v.base_label)}
        unknown = [w for w in variants if w not in labels]
        if unknown:
            per = "; ".join(f"{n}: {', '.join(v.label for v in vs)}" for n, vs in known.items())
            raise ExperimentError(f"unknown variant(s) {', '.join(unknown)}; known: {per}")
    out = []
    for e in chosen:
        vs = filter_variants(e.resolve(scale, overrides), variants)
        out.append((e, [v for v in vs if (e.name, v.label) not in skipped]))
    if not any(vs for _, vs in out):
        raise ExperimentError("nothing to run: every selected variant is skipped")
    return out


# ---------------------------------------------------------------------------
# Settings schema: the type and range of every setting an experiment declares
# or a user may override. tests/unit/test_experiments.py checks that every
# value in perftables.yaml fits it, so the two cannot drift apart.


@dataclass(frozen=True)
class Setting:
    kind: str  # int, float, bool, str, label (any scalar), w (int or tag), mapping, list
    lo: float | None = None
    hi: float | None = None
    choices: tuple = ()
    nullable: bool = False

    def describe(self) -> str:
        if self.choices:
            return "one of " + ", ".join(map(str, self.choices))
        what = {
            "int": "an integer",
            "float": "a number",
            "bool": "true or false",
            "str": "text",
            "label": "a label (text or number)",
            "w": "a write concern (a number >= 0 or a tag such as majority)",
            "mapping": "a mapping",
            "list": "a list",
        }[self.kind]
        if self.lo is not None and self.hi is not None:
            what += f" in [{self.lo:g}, {self.hi:g}]"
        elif self.lo is not None:
            what += f" >= {self.lo:g}"
        return what


_COUNT = 10**12
SETTINGS: dict[str, Setting] = {
    # inserts
    "doc_size_kb": Setting("float", 0.0625, 16000),  # 64 bytes (the template) .. 16 MB BSON
    "total_docs": Setting("int", 1, _COUNT),
    "batch_size": Setting("int", 1, 100000),
    "threads": Setting("int", 1, 10000),
    "id_type": Setting("str", choices=("objectid", "uuid", "business_id", "serial")),
    "secondary_indexes": Setting("int", 0, 63),  # mongod: 64 indexes per collection
    "preload_docs": Setting("int", 0, _COUNT),
    "write_concern": Setting("w", nullable=True),
    # updates, deletes
    "total_ops": Setting("int", 1, _COUNT, nullable=True),
    "duration_s": Setting("float", 0.001, 10**7, nullable=True),
    "warmup_s": Setting("float", 0, 10**7, nullable=True),
    # open loop: the variant's operations per second over all its clients (docs/perftables.md)
    "target_ops_per_s": Setting("float", 0.001, 10**9, nullable=True),
    "index_update": Setting("bool"),
    "function": Setting("str", choices=("update_one", "find_one_and_update")),
    "upsert": Setting("bool"),
    "percent_new": Setting("float", 0, 100),
    "doc_range": Setting("int", 1, _COUNT),
    "n_fields": Setting("int", 1, 1000),
    "expressive": Setting("bool"),
    "validation": Setting("bool"),
    "variant_kind": Setting("str"),
    "indexes": Setting("int", 0, 63),
    "update_indexed_fields": Setting("bool"),
    "docs_per_delete": Setting("int", 1, _COUNT),
    # queries
    "group_size": Setting("int", 1, _COUNT),
    "cached_docs": Setting("int", 1, _COUNT),
    "cached_groups": Setting("int", 1, _COUNT),
    "limit": Setting("int", 1, 10**7),
    "skip": Setting("int", 0, _COUNT),
    "expect_full": Setting("bool"),
    "query_type": Setting("str"),
    "query": Setting("mapping"),
    "projection": Setting("mapping", nullable=True),
    "pipeline_kind": Setting("str"),
    "pipeline": Setting("list"),
    # shell micro-benchmarks, key-value
    "insert_threads": Setting("int", 1, 10000),
    "prefix_len": Setting("int", 1, 8),  # keywords have 8 letters
    "records": Setting("int", 1, _COUNT),
    "bucket_size": Setting("int", 0, 100000),
    "read_proportion": Setting("float", 0, 1),
    "driver": Setting("str", choices=("pymongo", "pipelined")),
    "depth": Setting("int", 1, 1024),
    # hardware labels (from PKB's specs, the Atlas cluster, or the user)
    "instance_type": Setting("label"),
    "disk_type": Setting("label"),
    "disk_iops": Setting("label"),
    "disk_mb_s": Setting("float", 0),
    # the server's network bandwidth (MB/s) the bottleneck judgement compares bytes against
    "network_mb_s": Setting("float", 0),
    "price_per_hour": Setting("float", 0),
    # true: run a variant even when the capability probe finds the server lacks a feature it
    # needs (the variant then fails as the server answers, instead of being n/a)
    "run_unsupported": Setting("bool"),
    # sharded deployments (set by the PKB module)
    "sharded": Setting("bool"),
    "shard_key": Setting("str"),
}


def check_setting(key: str, value, where: str = "--set"):
    """`value` when it fits setting `key`'s type and range; else an ExperimentError
    naming `where` (the flag), the key, the value and what is allowed."""
    spec = SETTINGS.get(key)
    if spec is None:
        raise ExperimentError(
            f"{where}: unknown setting {key!r}; known settings: {', '.join(sorted(SETTINGS))}"
        )
    if value is None:
        if spec.nullable:
            return None
        raise ExperimentError(f"{where}: {key} needs a value ({spec.describe()})")
    ok = _fits(spec, value)
    if ok and spec.kind in ("int", "float") and spec.lo is not None:
        ok = spec.lo <= value and (spec.hi is None or value <= spec.hi)
    if ok and spec.choices:
        ok = value in spec.choices
    if not ok:
        raise ExperimentError(f"{where}: {key}={value!r} is not {spec.describe()}")
    return int(value) if spec.kind == "int" else value


def _fits(spec: Setting, value) -> bool:
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if spec.kind == "int":
        return number and float(value).is_integer()
    if spec.kind == "float":
        return number and math.isfinite(value)
    if spec.kind == "bool":
        return isinstance(value, bool)
    if spec.kind == "str":
        return isinstance(value, str) and value != ""
    if spec.kind == "label":
        return (number or isinstance(value, str)) and value != ""
    if spec.kind == "w":
        return (number and float(value).is_integer() and value >= 0) or (
            isinstance(value, str) and value != ""
        )
    if spec.kind == "mapping":
        return isinstance(value, dict)
    return isinstance(value, list)


def parse_setting(key: str, text: str, where: str = "--set"):
    """The typed value of `key=text` from a command line: YAML scalars (10 -> int,
    true -> bool), except that text settings keep the text as written."""
    spec = SETTINGS.get(key)
    text = text.strip()
    if spec is not None and spec.kind == "str":
        return check_setting(key, text, where)
    try:
        value = yaml.safe_load(text) if text else None
    except yaml.YAMLError:
        value = text
    if spec is not None and spec.kind == "label" and not isinstance(value, (int, float, str)):
        value = text
    if spec is not None and spec.kind in ("int", "float") and isinstance(value, str):
        try:
            value = float(value)  # YAML 1.1 reads 3e2 as text
        except ValueError:
            pass
    return check_setting(key, value, where)


def parse_overrides(pairs, where: str = "--set") -> dict:
    """`["key=value", ...]` -> {key: typed value}, every key known and every value in
    range. The one parser of the CLI's --set and PKB's --mongodb_perftables_set."""
    try:
        raw = parse_pairs(
            [str(p) for p in pairs or []], where, form="key=value", require_value=False
        )
    except ValueError as e:
        raise ExperimentError(str(e)) from None
    return {key: parse_setting(key, value, where) for key, value in raw.items()}


def check_overrides(overrides: dict | None, where: str = "overrides") -> dict:
    """Already-typed overrides (e.g. from PKB specs) checked against the schema."""
    return {k: check_setting(k, v, where) for k, v in (overrides or {}).items()}
