"""What every typed run request shares: a frozen dataclass of JSON values read from a
request file, its unknown keys refused, each field checked against the type it is declared
with, and its options named in one-line errors as the surface that gave them names them
(a CLI flag, a PKB flag, a request file's key).

A request module declares its dataclass (fields of the types in TYPES only) and its error
(a RequestError); `from_json`, `read_text` and `check_types` do the rest.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable


class RequestError(ValueError):
    """A request that cannot run: one line naming the option and the value."""


def request_key(source: str) -> Callable[[str], str]:
    """Names a field as the key of the request file `source`: 'run.json: max_seconds'."""
    return lambda name: f"{source}: {name}"


# Declared type (as written in the dataclass, `from __future__ import annotations`) ->
# (accepted Python types, how an error describes it). A JSON true is no number.
TYPES: dict[str, tuple[tuple[type, ...], str]] = {
    "str": ((str,), "a text"),
    "str | None": ((str, type(None)), "a text or null"),
    "int": ((int,), "a whole number"),
    "int | None": ((int, type(None)), "a whole number or null"),
    "float": ((int, float), "a number"),
    "float | None": ((int, float, type(None)), "a number or null"),
    "bool": ((bool,), "true or false"),
    "dict": ((dict,), "an object"),
    "list[str] | None": ((list, type(None)), "a list of names or null"),
    "list[float]": ((list,), "a list of numbers"),
}


def is_a(value, declared: str) -> bool:
    """`value` is of the declared type (a bool only where a bool is declared)."""
    accepted, _ = TYPES[declared]
    if isinstance(value, bool) and bool not in accepted:
        return False
    if not isinstance(value, accepted):
        return False
    if declared == "list[float]":
        return all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)
    return True


def check_types(request, name: Callable[[str], str], error: type[RequestError]) -> None:
    """Each field of `request` of the type it is declared with (a file may hold anything)."""
    for f in dataclasses.fields(request):
        value = getattr(request, f.name)
        if not is_a(value, f.type):
            raise error(f"{name(f.name)}: {value!r} is not {TYPES[f.type][1]}")


def from_json(cls, text: str, source: str, error: type[RequestError]):
    """The request of dataclass `cls` in `text`: an object of its keys (an unknown key is
    refused, a missing one takes its default), type-checked, not yet validated."""
    try:
        doc = json.loads(text)
    except ValueError as e:
        raise error(f"{source}: not JSON: {e}") from None
    if not isinstance(doc, dict):
        raise error(f"{source}: a request is a JSON object, not {type(doc).__name__}")
    known = [f.name for f in dataclasses.fields(cls)]
    unknown = sorted(set(doc) - set(known))
    if unknown:
        raise error(
            f"{source}: unknown key(s) {', '.join(unknown)}; known keys: {', '.join(known)}"
        )
    request = cls(**doc)
    check_types(request, request_key(source), error)
    return request


def read_text(path: str, error: type[RequestError]) -> str:
    """The text of the request file `path` (given with --request)."""
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError) as e:
        why = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        raise error(f"--request {path}: {why}") from None


def to_json(request) -> str:
    return json.dumps(dataclasses.asdict(request), indent=1, sort_keys=True) + "\n"


class Named:
    """A request that remembers how its options were named when it was validated (the CLI's
    flags, PKB's, a request file's keys), so its copies and its later errors name them the
    same way. A request class sets `default_name`, its CLI's naming."""

    default_name: Callable[[str], str]

    def _named(self, name: Callable[[str], str]) -> None:
        object.__setattr__(self, "_names", name)

    @property
    def validated(self) -> bool:
        return hasattr(self, "_names")

    def replace(self, **changes):
        """A copy with `changes`, naming its options as this one does (not validated again:
        e.g. PKB's benchmark sets a client VM's paths, which the CLI there validates)."""
        new = dataclasses.replace(self, **changes)
        if self.validated:
            object.__setattr__(new, "_names", self._names)
        return new

    def _name(self, key: str) -> str:
        return getattr(self, "_names", type(self).default_name)(key)
