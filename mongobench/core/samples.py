"""Sample dicts (metric, value, unit, metadata) as the engine hands them to PKB and reports."""

from collections.abc import Mapping


def sample(metric: str, value: float, unit: str, md: Mapping) -> dict:
    return {"metric": metric, "value": float(value), "unit": unit, "metadata": dict(md)}


def failure_sample(metric: str, error: str, md: Mapping, *, limit: int = 1000) -> dict:
    """One failure as a sample (value 1 count) with its error text cut to `limit` characters."""
    return sample(metric, 1, "count", {**md, "error": error[:limit]})
