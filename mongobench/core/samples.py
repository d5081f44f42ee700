"""Sample dicts (metric, value, unit, metadata) as the engine hands them to PKB and reports."""

from collections.abc import Mapping


def sample(metric: str, value: float, unit: str, md: Mapping) -> dict:
    return {"metric": metric, "value": float(value), "unit": unit, "metadata": dict(md)}
