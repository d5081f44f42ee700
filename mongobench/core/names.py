"""MongoDB database and collection names, checked before anything runs.

The rules are MongoDB's (manual: "Naming Restrictions"), plus the benchmark's own: the
experiments create and drop collections in their database, so a system database
(admin, local, config) is refused.
"""

from __future__ import annotations

_DB_FORBIDDEN = set('/\\. "$*<>:|?\x00')
SYSTEM_DATABASES = ("admin", "local", "config")


def check_database(name: str | None, option: str) -> str:
    """`name` when MongoDB accepts it as a database the benchmark may own; else ValueError
    naming `option` and the value."""
    if not name:
        raise ValueError(f"{option}: empty database name")
    bad = sorted(set(name) & _DB_FORBIDDEN)
    if bad:
        shown = " ".join(repr(c) for c in bad)
        raise ValueError(f"{option} {name!r}: a database name cannot hold {shown}")
    if len(name.encode()) >= 64:
        raise ValueError(f"{option} {name!r}: a database name has fewer than 64 bytes")
    if name.lower() in SYSTEM_DATABASES:
        raise ValueError(
            f"{option} {name!r}: a system database; the benchmark creates and drops"
            " collections in its database, give another name"
        )
    return name


def check_collection(name: str | None, option: str) -> str:
    """`name` when MongoDB accepts it as a collection the benchmark may create and drop."""
    if not name:
        raise ValueError(f"{option}: empty collection name")
    if "$" in name or "\x00" in name:
        raise ValueError(f"{option} {name!r}: a collection name cannot hold '$' or a null byte")
    if name.startswith("system."):
        raise ValueError(f"{option} {name!r}: the system. prefix is reserved")
    if len(name.encode()) > 200:
        raise ValueError(f"{option} {name!r}: longer than 200 bytes")
    return name
