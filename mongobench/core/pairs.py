"""key=value pairs from command lines and flags."""

from __future__ import annotations

from collections.abc import Sequence


def parse_pairs(
    pairs: Sequence[str] | None,
    what: str,
    number: bool = False,
    *,
    form: str = "NAME=VALUE",
    require_value: bool = True,
) -> dict:
    """``NAME=VALUE`` pairs, keys stripped; a price's name may hold '=' (split at the last),
    a label's file name may not (split at the first). Errors are ValueErrors naming `what`
    and `form`."""
    out: dict = {}
    for pair in pairs or []:
        key, sep, value = pair.rpartition("=") if number else pair.partition("=")
        if not sep or not key.strip() or (require_value and not value.strip()):
            raise ValueError(f"{what} takes {form}, not {pair!r}")
        if number:
            try:
                value = float(value.strip().lstrip("$"))
            except ValueError:
                raise ValueError(f"{what}: {pair!r}: the price must be a number") from None
            if not value > 0:
                raise ValueError(f"{what}: {pair!r}: the price must be > 0")
        out[key.strip()] = value
    return out
