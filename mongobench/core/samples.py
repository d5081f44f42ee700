"""Sample dicts (metric, value, unit, metadata) as the engine hands them to PKB and reports."""

from collections.abc import Mapping


def sample(metric: str, value: float, unit: str, md: Mapping) -> dict:
    return {"metric": metric, "value": float(value), "unit": unit, "metadata": dict(md)}


def failure_sample(metric: str, error: str, md: Mapping, *, limit: int = 1000) -> dict:
    """One failure as a sample (value 1 count) with its error text cut to `limit` characters."""
    return sample(metric, 1, "count", {**md, "error": error[:limit]})


# PKB's time-series form (perfkitbenchmarker.sample.CreateTimeSeriesSample): value 0, the
# series in the metadata under these keys, timestamps in epoch seconds.
TIME_SERIES_KEYS = ("values", "timestamps", "interval")


def time_series(
    metric: str, values: list, timestamps: list, unit: str, interval: float, md: Mapping
) -> dict:
    """A time-series sample as PKB's CreateTimeSeriesSample makes it (the PKB module hands
    these to it); `timestamps`: epoch seconds of each value's interval start."""
    if len(values) != len(timestamps):
        raise ValueError(f"{metric}: {len(values)} values for {len(timestamps)} timestamps")
    return sample(
        metric,
        0,
        unit,
        {**md, "values": list(values), "timestamps": list(timestamps), "interval": interval},
    )


def is_time_series(s: Mapping) -> bool:
    md = s.get("metadata") or {}
    return all(k in md for k in TIME_SERIES_KEYS)
