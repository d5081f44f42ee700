"""Keeps connection secrets out of samples, logs and command lines."""

from __future__ import annotations

import os
import re
import urllib.parse

# The user-info runs to the LAST '@' of the URI: an unescaped '/', '?' or '@' in a password
# must not end it early and leave the rest of the password in the text (over-masking a query
# that holds an '@' is the safe failure).
_USERINFO = re.compile(r"(mongodb(?:\+srv)?://)(\S+)@", re.IGNORECASE)


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
        return _one_line(value, f"URI file {uri_file}")
    if env:
        value = os.environ.get(env, "").strip()
        if not value:
            raise ValueError(f"environment variable {env} is empty or unset")
        return _one_line(value, f"environment variable {env}")
    if uri_value:
        return uri_value
    raise ValueError("no target: give a URI, a URI file or an environment variable")


def _one_line(value: str, source: str) -> str:
    lines = [line for line in value.splitlines() if line.strip()]
    if len(lines) > 1:
        raise ValueError(f"{source} holds {len(lines)} lines; one connection string expected")
    return value


SCHEMES = ("mongodb://", "mongodb+srv://")


class TargetError(ValueError):
    """A target that cannot be used; the message holds no secret."""


def safe_target(value: str) -> str:
    """A printable form of a possibly malformed target: credentials masked even when
    the user-info is not escaped (everything before the last '@' of the host part)."""
    value = (value or "").strip()
    scheme = next((s for s in SCHEMES if value.lower().startswith(s)), None)
    if scheme is None:
        return "the target"  # not a connection string: nothing of it is shown
    rest = value[len(scheme) :]
    if "@" in rest:  # everything before the last '@' may be a password: none of it shown
        return f"{value[: len(scheme)]}***@{rest.rpartition('@')[2]}"
    return value


def check_uri(value: str, source: str = "the target") -> str:
    """`value` when it is a MongoDB connection string pymongo can parse (scheme, hosts,
    escaping, option values); else TargetError whose message names `source` and the
    redacted target and never the password. No network: SRV names are not resolved."""
    value = (value or "").strip()
    if not value.lower().startswith(SCHEMES):
        raise TargetError(
            f"{source}: not a MongoDB connection string (it must start with mongodb:// or"
            " mongodb+srv://)"
        )
    try:
        # Imported here: the PKB host imports this module too and may lack pymongo
        # (only the client VMs need it); there the scheme check above is what runs.
        from pymongo import uri_parser
        from pymongo.errors import PyMongoError
    except ImportError:
        return value
    if _unescaped_userinfo(value):
        raise TargetError(
            f"{safe_target(value)}: cannot parse it: user name and password must be"
            " percent-escaped (RFC 3986)"
        )
    unknown = _unknown_options(value)
    if unknown:
        raise TargetError(
            f"{safe_target(value)}: unknown connection string option(s) {', '.join(unknown)}"
        )
    srv = value.lower().startswith("mongodb+srv://")
    plain = "mongodb://" + value[len("mongodb+srv://") :] if srv else value
    try:
        # Strict: an option pymongo does not know or a bad option value is an error
        # here (MongoClient would only warn and drop it).
        parsed = uri_parser.parse_uri(plain, default_port=None, validate=True, warn=False)
        if srv and (len(parsed["nodelist"]) != 1 or parsed["nodelist"][0][1] is not None):
            raise ValueError("a mongodb+srv:// URI names exactly one host and no port")
    except (PyMongoError, ValueError, TypeError) as e:
        raise TargetError(f"{safe_target(value)}: {_masked(str(e), value)}") from None
    return value


def _unescaped_userinfo(value: str) -> bool:
    """Whether the user name or password holds a character RFC 3986 wants escaped, read as
    pymongo reads it (user-info: up to the last '@' before the first '/'), plus the case
    pymongo would misread: a '/' in the password puts the '@' after the first '/'."""
    rest = value.split("://", 1)[1]
    hosts = rest.partition("/")[0]
    userinfo = hosts.rpartition("@")[0]
    if re.search(r"[@/?#\[\]]", userinfo) or userinfo.count(":") > 1:
        return True
    if "@" not in hosts and "@" in rest:
        # "user:pa/ss@host": the hosts part "user:pa" names no port a number can be
        port = hosts.rpartition(":")[2] if ":" in hosts else ""
        # ... or "us/er:pass@host": a path (no query yet) holding "name:password"
        between = rest.partition("/")[2].rpartition("@")[0]
        in_path = ":" in between and "?" not in between
        return (bool(port) and not port.isdigit()) or in_path
    return False


def _unknown_options(value: str) -> list[str]:
    """Option names of the query string that pymongo does not know (case-insensitive, as
    the URI spec): checked here so the message is ours, not a driver version's wording."""
    from pymongo import common

    known = {k.lower() for k in common.URI_OPTIONS_VALIDATOR_MAP}
    known |= {a.lower() for aliases in common.URI_OPTIONS_ALIAS_MAP.values() for a in aliases}
    known |= {k.lower() for k in common.URI_OPTIONS_DEPRECATION_MAP}
    query = value.split("?", 1)[1] if "?" in value else ""
    names = [part.split("=", 1)[0] for part in re.split("[&;]", query) if part]
    return [repr(n) for n in names if urllib.parse.unquote(n).lower() not in known]


def _masked(message: str, value: str) -> str:
    # The user-info ends at the last '@' (an unescaped '@' in a password is what makes
    # many of these URIs bad), so uri()'s shorter match does not apply here.
    out = uri(message)
    userinfo = value.split("://", 1)[-1].split("?", 1)[0].rpartition("@")[0]
    if userinfo:
        out = out.replace(userinfo, "***")
        password = userinfo.split(":", 1)[1] if ":" in userinfo else ""
        if re.search(r"[@/:?#\[\]]", password):
            # pymongo's message may quote a piece of the unescaped password (e.g. as a
            # "database name"): say what is wrong instead.
            return "cannot parse it: user name and password must be percent-escaped (RFC 3986)"
        for part in (password, urllib.parse.unquote(password)):
            if part:
                out = out.replace(part, "***")
    return out
