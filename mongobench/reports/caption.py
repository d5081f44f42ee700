"""The provenance line under every table and on every plot: what was measured, at what
scale, when, how many times, and what the error bars mean. A figure copied out of the
report (a plot pasted into a slide) keeps it.

Results from the stand-in (mongo-java-server, in memory) say "stand-in: not a performance
figure": they test the tool, not MongoDB.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping

from mongobench.perftables import identity
from mongobench.remote.provenance import STANDIN_ENGINE

STANDIN_NOTE = "stand-in: not a performance figure"


def target(md: Mapping) -> str:
    """The target of a sample's metadata: Atlas tier, mongod version and topology, the
    stand-in, or another server that speaks the protocol."""
    version, topology = md.get("server_version") or "?", md.get("topology") or "?"
    if md.get("atlas_tier"):
        return f"Atlas {md['atlas_tier']}, MongoDB {version} ({topology})"
    engine = md.get("storage_engine")
    if engine == STANDIN_ENGINE or md.get("server_product") == identity.STANDIN_PRODUCT:
        return f"stand-in claiming MongoDB {version} ({topology})"
    if engine and engine not in ("unknown", "?"):
        return f"mongod {version}, {engine} ({topology})"
    return f"a compatible server reporting {version} ({topology}; no storage engine reported)"


def target_kind(md: Mapping) -> str:
    """What kind of server a sample measured: Atlas, mongod, the stand-in, or another
    compatible server (with its product when known)."""
    text = target(md)
    if text.startswith("Atlas"):
        return "Atlas"
    if text.startswith("stand-in"):
        return "stand-in"
    if text.startswith("mongod"):
        return "mongod"
    product = md.get("server_product")
    return f"{product}" if product not in (None, "", "unknown") else "compatible server"


def _date(stamps: Iterable) -> str:
    got = []
    for t in stamps:
        try:
            got.append(float(t))
        except (TypeError, ValueError):
            continue
    if not got:
        return "date unknown"
    days = sorted({datetime.datetime.fromtimestamp(t, datetime.UTC).date() for t in got})
    return str(days[0]) if len(days) == 1 else f"{days[0]} to {days[-1]}"


def _repeats(mds: list[Mapping]) -> int:
    best = 1
    for md in mds:
        try:
            best = max(best, int(float(md.get("repeats") or 1)))
        except (TypeError, ValueError):
            continue
    return best


def error_bars(mds: list[Mapping]) -> str:
    n = _repeats(mds)
    if n >= 2 and any(md.get("ci95_low") is not None for md in mds):
        return f"error bars: 95 % confidence interval of the mean of {n} repeats"
    if any(md.get("stdev") is not None for md in mds):
        return "error bars: ± one standard deviation"
    return "no error bars (one run per variant)"


def sweep_scale(mds: Iterable[Mapping]) -> str:
    """The scale of dataset-size sweep samples: their sizes (`size_mb`)."""
    sizes = set()
    for m in mds:
        try:
            sizes.add(float(m.get("size_mb")))
        except (TypeError, ValueError):
            continue
    if not sizes:
        return "sizes ?"
    label = lambda mb: f"{mb / 1000:g} GB" if mb >= 1000 else f"{mb:g} MB"  # noqa: E731
    lo, hi = min(sizes), max(sizes)
    return f"size {label(lo)}" if lo == hi else f"sizes {label(lo)} to {label(hi)}"


def stress_scale(mds: Iterable[Mapping]) -> str:
    """The scale of mongodb_stress samples: records per instance, when they say."""
    records = sorted(
        {
            str(m["records_per_instance"])
            for m in mds
            if m.get("records_per_instance") not in (None, "")
        }
    )
    return f"{', '.join(records)} records per instance" if records else "records ?"


def line(mds: list[Mapping], stamps: Iterable = (), scale: str | None = None) -> str:
    """One line for a table or plot whose rows have metadata `mds` and timestamps
    `stamps` (epoch seconds). `scale`: what the scale is for results that have no perftables
    `scale` (the sweep's sizes: sweep_scale; stress: stress_scale)."""
    mds = [m for m in mds if m] or [{}]
    targets = sorted({target(m) for m in mds})
    scales = sorted({str(m.get("scale") or "?") for m in mds})
    n = _repeats(mds)
    parts = [
        "Target: " + "; ".join(targets),
        scale or "scale " + ", ".join(scales),
        _date(stamps),
        f"{n} repeat{'s' if n > 1 else ''}",
        error_bars(mds),
    ]
    if any(target(m).startswith("stand-in") for m in mds):
        parts.append(STANDIN_NOTE)
    return ". ".join([parts[0], "; ".join(parts[1:])]) + "."


def sweep_line(samples: Iterable[Mapping]) -> str:
    """The provenance line under a sweep's table (sweep run), as under the perftables tables."""
    samples = list(samples)
    mds = [s["metadata"] for s in samples]
    return line(mds, [s.get("timestamp") for s in samples], sweep_scale(mds))
