"""Units of size, and sizes and durations as a person reads them. Binary units for memory
and documents; MB (decimal) where seed 002 counts dataset sizes (1 MB = 1,000 records of 1 KB)."""

KiB = 1024
MiB = 1024 * 1024
GiB = 1024**3
MB = 1_000_000


def human_bytes(n: float) -> str:
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n:.0f} B"


def human_seconds(s: float) -> str:
    s = round(s)
    h, rest = divmod(s, 3600)
    m, sec = divmod(rest, 60)
    if h:
        return f"{h}h{m:02d}m"
    if m:
        return f"{m}m{sec:02d}s"
    return f"{sec}s"
