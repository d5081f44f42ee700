"""What a perftables plan will cost before it runs: nominal data volume and wall time.

The volume is what the variants write: their preloads (a preload that an earlier variant of
the plan already left in place, same workload, count and size, is reused and counted once,
as the runner reuses it) and their inserts. The time is, per variant, the preload at a load
rate, the timed phase (its duration and warm-up when duration-bound, else its documents at
an insert rate or its operations at an operation rate) and a fixed overhead (connections,
processes, measurements).

The rates are the target's: what earlier runs against the same target measured (recorded
by `record`, in the file measure.rates keeps), else a default table (DEFAULT_RATES, by server kind). The
defaults are rough: a real run records its own, and the next estimate uses them.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, replace

from mongobench.core import pricing
from mongobench.core.units import MB, KiB, human_bytes, human_seconds
from mongobench.measure.rates import read_record, target_key, write_record

CONFIRM_ABOVE_S = 3600.0  # the CLI asks (or wants --yes) above an hour
# Workloads whose timed phase changes the preloaded collection's document count: the next
# variant's preload marker no longer matches, so it loads again.
CHANGES_COUNT = frozenset({"insert", "delete", "mixed", "bucket", "update_api"})


@dataclass(frozen=True)
class Rates:
    insert_mb_s: float  # bulk inserts of the timed phase (MB = 10^6 bytes)
    load_mb_s: float  # preloads
    ops_s: float  # single operations (updates, finds, deletes) of count-bound phases
    overhead_s: float  # per variant: connecting, worker processes, measurements
    source: str = "default"


# Rough figures for a first run (a later run uses what the earlier one measured):
# mongod, a modest VM; standin, the project's stand-in on a shared 2-core test bed.
DEFAULT_RATES = {
    "mongod": Rates(insert_mb_s=50.0, load_mb_s=50.0, ops_s=5000.0, overhead_s=3.0),
    "standin": Rates(insert_mb_s=1.5, load_mb_s=3.0, ops_s=1500.0, overhead_s=2.5),
}


def rates_for(uri: str | None, kind: str = "mongod") -> Rates:
    """What past runs measured against this target, else the default table's `kind`."""
    past = read_record(target_key(uri)) if uri else None
    if past:
        try:
            return Rates(
                float(past["insert_mb_s"]),
                float(past["load_mb_s"]),
                float(past["ops_s"]),
                float(past["overhead_s"]),
                source=f"past runs ({past.get('updated', '?')})",
            )
        except (KeyError, TypeError, ValueError):
            pass
    return replace(DEFAULT_RATES.get(kind, DEFAULT_RATES["mongod"]), source=f"default ({kind})")


@dataclass
class VariantEstimate:
    experiment: str
    label: str
    labels: dict  # label setting -> value
    volume_bytes: float
    seconds: float


@dataclass
class Estimate:
    variants: list[VariantEstimate]
    rates: Rates
    repeats: int = 1

    @property
    def volume_bytes(self) -> float:
        return sum(v.volume_bytes for v in self.variants) * self.repeats

    @property
    def seconds(self) -> float:
        return sum(v.seconds for v in self.variants) * self.repeats

    def summary(self) -> str:
        exps = list(dict.fromkeys(v.experiment for v in self.variants))
        reps = f" x {self.repeats} repeats" if self.repeats > 1 else ""
        return (
            f"{len(self.variants)} variant(s){reps} of {len(exps)} experiment(s)"
            f" ({', '.join(exps) if len(exps) <= 4 else ', '.join(exps[:4]) + ', ...'}):"
            f" nominal data {human_bytes(self.volume_bytes)},"
            f" estimated time {human_seconds(self.seconds)} (rates: {self.rates.source})"
        )

    def metadata(self) -> dict:
        return {
            "estimated_seconds": round(self.seconds, 1),
            "estimated_data_mb": round(self.volume_bytes / MB, 1),
            "estimate_rates": self.rates.source,
        }


def _doc_bytes(s: dict) -> float:
    return float(s.get("doc_size_kb") or 0) * KiB


def estimate(planned, rates: Rates, repeats: int = 1) -> Estimate:
    """`planned`: (Experiment, [Variant]) pairs as experiments.plan gives them, in run order."""
    loaded: set = set()
    out = []
    for exp, v in ((e, v) for e, vs in planned for v in vs):
        s = v.settings
        workload = exp.workload
        doc = _doc_bytes(s)
        preload = float(s.get("preload_docs") or 0) * doc
        key = (workload, s.get("preload_docs"), s.get("doc_size_kb"))
        if key in loaded and workload not in CHANGES_COUNT:
            preload = 0.0  # reused, as the runner's marker reuses it
        elif preload:
            loaded.add(key)
        inserted = float(s.get("total_docs") or 0) * doc
        if s.get("records"):  # bucket test: small documents
            inserted += float(s["records"]) * 64
        seconds = rates.overhead_s + preload / MB / rates.load_mb_s
        if s.get("duration_s"):
            seconds += float(s["duration_s"]) + float(s.get("warmup_s") or 0)
        elif inserted:
            seconds += inserted / MB / rates.insert_mb_s
        elif s.get("total_ops"):
            seconds += float(s["total_ops"]) / rates.ops_s
        # the label's own (full-scale) value, also of a key the scale changed
        labels = {k: s.get(f"nominal_{k}", s.get(k)) for k in exp.label}
        out.append(VariantEstimate(v.experiment, v.label, labels, preload + inserted, seconds))
    return Estimate(out, rates, repeats)


def measured_rates(results: list[dict], wall_s: float) -> dict | None:
    """Rates a finished run measured (ok variants only): the record for `record`."""
    ok = [r for r in results if r.get("status") == "ok" and r.get("duration_s")]
    if not ok:
        return None
    ins_b = sum(
        r.get("bytes") or 0
        for r in ok
        if r.get("bytes") and not (r.get("planned") or {}).get("duration_s")
    )
    ins_t = sum(
        r["duration_s"]
        for r in ok
        if r.get("bytes") and not (r.get("planned") or {}).get("duration_s")
    )
    ops_n = sum(
        sum((r.get("ops") or {}).values())
        for r in ok
        if not r.get("bytes") and not (r.get("planned") or {}).get("duration_s")
    )
    ops_t = sum(
        r["duration_s"]
        for r in ok
        if not r.get("bytes") and not (r.get("planned") or {}).get("duration_s")
    )
    load_b = load_t = 0.0
    for r in ok:
        s = r.get("settings") or {}
        if s.get("preload_docs") and not (r.get("prepared") or {}).get("preload_reused", False):
            load_b += float(s["preload_docs"]) * _doc_bytes(s)
            load_t += float(r.get("prepare_s") or 0)
    inner = sum(float(r.get("prepare_s") or 0) + r["duration_s"] for r in ok)
    overhead = max(0.0, wall_s - inner) / len(results) if results else 0.0
    old = DEFAULT_RATES["mongod"]
    return {
        "insert_mb_s": ins_b / MB / ins_t if ins_b and ins_t else old.insert_mb_s,
        "load_mb_s": load_b / MB / load_t if load_b and load_t else old.load_mb_s,
        "ops_s": ops_n / ops_t if ops_n and ops_t else old.ops_s,
        "overhead_s": overhead,
    }


def record(uri: str, results: list[dict], wall_s: float, kind: str = "mongod") -> None:
    """Keeps what this run measured against `uri` for the next estimate. Figures a run did
    not measure (no inserts, say) keep the earlier ones, else the default table's `kind`."""
    got = measured_rates(results, wall_s)
    if got is None:
        return
    base = asdict(rates_for(uri, kind))
    base.pop("source", None)
    had = {
        "insert_mb_s": any(
            r.get("bytes") and not (r.get("planned") or {}).get("duration_s") for r in results
        ),
        "ops_s": any(
            not r.get("bytes") and not (r.get("planned") or {}).get("duration_s") for r in results
        ),
        "load_mb_s": any(
            (r.get("settings") or {}).get("preload_docs")
            and not (r.get("prepared") or {}).get("preload_reused", False)
            for r in results
        ),
        "overhead_s": True,
    }
    entry = {k: (got[k] if had[k] else base[k]) for k in base}
    entry["updated"] = time.strftime("%Y-%m-%d")
    write_record(target_key(uri), entry)


def cost(
    seconds: float,
    vms: list[tuple[str | None, int]] = (),
    atlas_tier: str | None = None,
    provider: str = "AWS",
    region: str | None = None,
) -> str:
    """The estimated cost of `seconds` of cloud VMs ((machine type, count) pairs) and an Atlas
    cluster, from the list prices of core.pricing; what has no price is named."""
    hourly, unknown = 0.0, []
    for machine, count in vms:
        price = pricing.INSTANCE_PRICES.get(machine or "")
        if price is None:
            unknown.append(machine or "a VM of unknown type")
        else:
            hourly += price * count
    if atlas_tier:
        price = pricing.price_per_hour(atlas_tier, provider, region)
        if price is None:
            unknown.append(f"Atlas {atlas_tier}")
        else:
            hourly += price
    if not vms and not atlas_tier:
        return ""
    text = f"estimated cost ${hourly * seconds / 3600:.2f} at list prices ({pricing.PRICES_AS_OF})"
    if unknown:
        text += f", without {', '.join(dict.fromkeys(unknown))} (no price known)"
    return text
