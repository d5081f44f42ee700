"""Markdown tables and the one number format of every report."""

from __future__ import annotations

import math
from collections.abc import Sequence

NA = "n/a"


# ----------------------------------------------------------------------------- formatting


def _missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def fixed(value, digits: int) -> str:
    """`value` with `digits` decimals (0: rounded to an integer), or n/a (None, NaN)."""
    if _missing(value):
        return NA
    return f"{value:.{digits}f}" if digits else f"{round(value)}"


def fmt(value: float | None, digits: int | None = None) -> str:
    """fixed(value, digits); without digits: 0 decimals from 100 on, 2 from 1, else 3 significant."""
    if digits is not None or _missing(value):
        return fixed(value, digits)
    a = abs(value)
    if a >= 100:
        return f"{value:.0f}"
    if a >= 1:
        return f"{value:.2f}"
    return f"{value:.3g}"


def md_table(
    headers: Sequence[str], rows: Sequence[Sequence[str]], align: str | Sequence[str] = "--:"
) -> str:
    """A markdown table; `align` is one marker for every column or one per column."""
    aligns = [align] * len(headers) if isinstance(align, str) else list(align)
    lines = ["| " + " | ".join(headers) + " |", "| " + " | ".join(aligns) + " |"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)
