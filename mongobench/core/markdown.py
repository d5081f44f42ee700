"""Markdown tables and the one number format of every report."""

from __future__ import annotations

import math
from collections.abc import Sequence

NA = "n/a"


# ----------------------------------------------------------------------------- formatting


def fmt(value: float | None, digits: int | None = None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return NA
    if digits is not None:
        return f"{value:.{digits}f}"
    a = abs(value)
    if a >= 100:
        return f"{value:.0f}"
    if a >= 1:
        return f"{value:.2f}"
    return f"{value:.3g}"


def md_table(headers: Sequence[str], rows: Sequence[Sequence[str]], align: str = "--:") -> str:
    lines = ["| " + " | ".join(headers) + " |", "| " + " | ".join([align] * len(headers)) + " |"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def fixed(value, digits: int) -> str:
    """`value` with `digits` decimals (0: rounded to an integer), or n/a."""
    if value is None:
        return NA
    return f"{value:.{digits}f}" if digits else f"{round(value)}"
