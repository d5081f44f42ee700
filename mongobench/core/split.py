"""Even splits of a total over parts (shares differ by at most one)."""


def share(total: int, parts: int, idx: int) -> int:
    """Share of `total` for part `idx` of `parts` (shares differ by at most 1)."""
    return total // parts + (1 if idx < total % parts else 0)


def part(total: int, parts: int, idx: int) -> range:
    """The items of part `idx` when `total` items are split in order over `parts`
    (part idx holds share(total, parts, idx) of them, after those of the parts before)."""
    q, r = divmod(total, parts)
    start = idx * q + min(idx, r)
    return range(start, start + share(total, parts, idx))


def split_evenly(total: int, parts: int) -> list[int]:
    """`total` in `parts` integers that differ by at most one and sum to `total`."""
    if parts < 1:
        raise ValueError("parts must be >= 1")
    return [share(int(total), parts, i) for i in range(parts)]
