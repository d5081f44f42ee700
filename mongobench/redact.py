"""Keeps connection secrets out of samples, logs and command lines."""

from __future__ import annotations

import os
import re
import urllib.parse

_USERINFO = re.compile(r"(mongodb(?:\+srv)?://)([^@/\s]+)@", re.IGNORECASE)


def uri(value: str) -> str:
    """The URI with its credentials replaced: `mongodb://user:***@host/...`."""

    def repl(m):
        user = m.group(2).split(":", 1)[0]
        return f"{m.group(1)}{user}:***@" if ":" in m.group(2) else f"{m.group(1)}{user}@"

    return _USERINFO.sub(repl, value)


def secrets_of(value: str) -> list[str]:
    """Password of a URI, raw and percent-decoded (both may show up in text)."""
    m = _USERINFO.search(value or "")
    if not m or ":" not in m.group(2):
        return []
    raw = m.group(2).split(":", 1)[1]
    return [s for s in {raw, urllib.parse.unquote(raw)} if s]


def text(value: str, *uris: str) -> str:
    """Text with every URI's credentials and password occurrences masked."""
    out = uri(value)
    for u in uris:
        for secret in secrets_of(u):
            out = out.replace(secret, "***")
    return out


def read_uri(uri_value: str | None = None, uri_file: str | None = None, env: str | None = None):
    """The target URI from a file, an environment variable or a value (in that order)."""
    if uri_file:
        with open(uri_file) as f:
            value = f.read().strip()
        if not value:
            raise ValueError(f"URI file {uri_file} is empty")
        return value
    if env:
        value = os.environ.get(env, "").strip()
        if not value:
            raise ValueError(f"environment variable {env} is empty or unset")
        return value
    if uri_value:
        return uri_value
    raise ValueError("no target: give a URI, a URI file or an environment variable")
