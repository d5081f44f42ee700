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

PERFTABLES_FILE = pathlib.Path(__file__).parent / "experiments" / "perftables.yaml"

# Named scales: the factor applied to every setting an experiment lists under
# `scaled`. "full" is the seed's size (24 GB loads); "smoke" runs in seconds.
SCALES = {"full": 1.0, "tenth": 0.1, "hundredth": 0.01, "small": 1e-3, "smoke": 1.2e-4}


class ExperimentError(ValueError):
    """A bad experiment file, experiment name, variant or scale."""


@dataclass
class Variant:
    experiment: str
    index: int
    label: str
    params: dict  # the variant's own overrides (its identity in tables)
    settings: dict  # every setting, scaled: what actually runs


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
    tables: dict = field(default_factory=dict)
    headers: dict = field(default_factory=dict)
    description: str = ""
    requires: list[str] = field(default_factory=list)

    def resolve(self, scale: float | str, overrides: dict | None = None) -> list[Variant]:
        """Concrete variants at `scale`; `overrides` replace shared settings."""
        factor = parse_scale(scale)
        out = []
        for i, params in enumerate(self.variants):
            settings = copy.deepcopy(self.settings)
            settings.update(overrides or {})
            settings.update(params)
            # Labels name the full-scale variant, so they match across scales.
            label = ", ".join(str(settings.get(k)) for k in self.label)
            for key, minimum in self.scaled.items():
                if key in settings and settings[key] is not None:
                    settings[key] = _scale_value(settings[key], factor, minimum)
            out.append(Variant(self.name, i, label, dict(params), settings))
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
    with open(path) as f:
        doc = yaml.safe_load(f)
    if not isinstance(doc, dict) or "experiments" not in doc:
        raise ExperimentError(f"{path}: no 'experiments' mapping")
    out = {}
    for name, spec in doc["experiments"].items():
        missing = [k for k in _REQUIRED if k not in spec]
        if missing:
            raise ExperimentError(f"{path}: experiment {name} lacks {', '.join(missing)}")
        label = spec["label"] if isinstance(spec["label"], list) else [spec["label"]]
        if not spec["variants"]:
            raise ExperimentError(f"{path}: experiment {name} has no variants")
        out[name] = Experiment(
            name=name,
            title=spec["title"],
            section=spec["section"],
            workload=spec["workload"],
            label=label,
            settings=dict(spec["settings"]),
            variants=[dict(v) for v in spec["variants"]],
            scaled=dict(spec.get("scaled", {})),
            tables=dict(spec.get("tables", {})),
            headers=dict(spec.get("headers", {})),
            description=spec.get("description", "").strip(),
            requires=list(spec.get("requires", [])),
        )
    return out


def select(experiments: dict[str, Experiment], names: list[str] | None) -> list[Experiment]:
    """Experiments by name in file order; all when `names` is empty or ['all']."""
    if not names or names == ["all"]:
        return list(experiments.values())
    unknown = [n for n in names if n not in experiments]
    if unknown:
        raise ExperimentError(
            f"unknown experiment(s) {', '.join(unknown)}; known: {', '.join(experiments)}"
        )
    return [experiments[n] for n in names]


def filter_variants(variants: list[Variant], wanted: list[str] | None) -> list[Variant]:
    """Keep variants whose label is in `wanted` (all when empty)."""
    if not wanted:
        return variants
    labels = {v.label for v in variants}
    unknown = [w for w in wanted if w not in labels]
    if unknown:
        raise ExperimentError(
            f"unknown variant(s) {', '.join(unknown)}; known: {', '.join(sorted(labels))}"
        )
    return [v for v in variants if v.label in wanted]


def parse_skip(spec: str | None) -> set[tuple[str, str]]:
    """`experiment/label;experiment/label` (labels may contain commas) -> pairs."""
    out = set()
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
    """The experiments and variants a run executes, validated up front."""
    skipped = parse_skip(skip)
    chosen = select(experiments, names)
    known = {(e.name, v.label) for e in chosen for v in e.resolve(scale, overrides)}
    unknown = sorted(f"{e}/{v}" for e, v in skipped - known)
    if unknown:
        raise ExperimentError(f"skip names unknown variant(s): {'; '.join(unknown)}")
    out = []
    for e in chosen:
        vs = (
            filter_variants(e.resolve(scale, overrides), variants)
            if variants
            else e.resolve(scale, overrides)
        )
        out.append((e, [v for v in vs if (e.name, v.label) not in skipped]))
    return out
