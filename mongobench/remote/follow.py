"""Following the output files of detached processes over repeated short ssh commands.

A long engine run or YCSB step runs detached on its VM (it survives a dropped ssh session);
PKB polls it. Each poll runs one shell command that prints the processes' states and the
bytes each followed file gained since the last poll; `Follower` keeps the byte offsets and
hands back only complete new lines, so a line is never logged twice or cut in half.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence

# A line no engine, YCSB or shell output holds: it separates the files in a poll's output.
_HEADER = "@@mongobench-follow {name}@@"
_HEADER_RE = re.compile(r"^@@mongobench-follow ([\w.@:-]+)@@$", re.M)
# PKB decodes ssh output as ASCII and drops other bytes, which would shift the offsets:
# every byte that is not printable ASCII, tab or newline becomes one "?" on the VM.
_ASCII = "LC_ALL=C tr -c '\\11\\12\\40-\\176' '?'"
# At most this many bytes of one file per poll, so a burst never makes one huge ssh reply;
# the rest comes with the next polls.
POLL_LIMIT = 256 * 1024


def follow_command(files: Sequence[tuple[str, str, int]], *, limit: int = POLL_LIMIT) -> str:
    """For each (name, path, offset): a header line, then the file's bytes from `offset` on
    (at most `limit`). A missing file gives its header alone. Parse with parse_follow."""
    parts = []
    for name, path, offset in files:
        if not re.fullmatch(r"[\w.@:-]+", name):
            raise ValueError(f"followed file name must be a plain word, got {name!r}")
        parts.append(
            f"echo {shlex.quote(_HEADER.format(name=name))}; "
            f"tail -c +{int(offset) + 1} {shlex.quote(path)} 2>/dev/null | head -c {int(limit)}"
            f" | {_ASCII};"
        )
    return "sh -c " + shlex.quote(" ".join(parts) + " true")


def parse_follow(text: str) -> tuple[str, dict[str, str]]:
    """(what came before the first header, {name: new text}) of a follow command's output."""
    headers = list(_HEADER_RE.finditer(text))
    head = text[: headers[0].start()] if headers else text
    chunks = {}
    for i, m in enumerate(headers):
        end = headers[i + 1].start() if i + 1 < len(headers) else len(text)
        chunks[m.group(1)] = text[m.end() + 1 : end]  # +1: the header's newline
    return head, chunks


class Follower:
    """Byte offsets of followed files; `feed` returns their complete new lines."""

    def __init__(self, files: Sequence[tuple[str, str]], *, limit: int = POLL_LIMIT):
        self.paths = dict(files)
        self.offsets = dict.fromkeys(self.paths, 0)
        self.limit = limit
        self.pending = False  # the last poll stopped at the limit: more is waiting

    def command(self, prefix: str = "") -> str:
        """`prefix` (e.g. a process-state command) then the follow command, in one shell."""
        follow = follow_command(
            [(n, p, self.offsets[n]) for n, p in self.paths.items()], limit=self.limit
        )
        return f"{prefix}; {follow}" if prefix else follow

    def feed(self, text: str, *, final: bool = False) -> tuple[str, dict[str, list[str]]]:
        """Takes a poll's output; returns (the prefix command's output, {name: new lines}).

        A line still being written (no newline yet) waits for the next poll, unless `final`
        (the process has ended: what is there is all there will be) or the line alone fills
        a poll's limit."""
        head, chunks = parse_follow(text)
        lines = {}
        self.pending = False
        for name, chunk in chunks.items():
            if name not in self.offsets:
                continue
            full = len(chunk) >= self.limit
            self.pending |= full
            whole = (final and not full) or ("\n" not in chunk and full)
            done = chunk if whole else chunk[: chunk.rfind("\n") + 1]
            self.offsets[name] += len(done)  # one ASCII character per byte (see _ASCII)
            lines[name] = [line for line in done.splitlines() if line.strip()]
        return head, lines
