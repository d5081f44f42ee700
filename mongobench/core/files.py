"""Files written safely: private (0600 from the start), and outputs that never replace what
they should not.

An output that is a regular file, or absent, is written to a temporary file beside it and
renamed over it: a reader sees the old file or the new one, never half. Anything else is
never replaced by a rename: a symbolic link is written through (its target keeps its
inode, the link stays a link), a character device or FIFO (`/dev/stdout`) is written
directly, a directory or a missing parent directory is refused with one line.
"""

from __future__ import annotations

import json
import os
import stat
import tempfile


class OutputError(ValueError):
    """An output path that cannot be used; the message names the option and the path."""


def check_output(path: str, option: str, rewritten: bool = False) -> None:
    """Refuses, before any work, an output that cannot be written: a directory, a missing
    or non-directory parent, a path not writable. `rewritten`: the file is written again
    and again as a run goes on (results after every variant), so it must be a regular
    file (or absent, or a link to one): a device or FIFO would get every version."""
    if not path:
        raise OutputError(f"{option}: empty path")
    if os.path.isdir(path):
        raise OutputError(f"{option} {path}: is a directory; give a file name")
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        what = "does not exist" if not os.path.exists(parent) else "is not a directory"
        raise OutputError(f"{option} {path}: the directory {parent} {what}")
    if os.path.exists(path):
        mode = os.stat(path).st_mode
        if not stat.S_ISREG(mode):
            if rewritten:
                raise OutputError(
                    f"{option} {path}: not a regular file; this file is rewritten as the run"
                    " goes on, so it must be a regular file (or absent)"
                )
            if not (stat.S_ISCHR(mode) or stat.S_ISFIFO(mode)):
                raise OutputError(f"{option} {path}: not a regular file, device or FIFO")
        if not os.access(path, os.W_OK):
            raise OutputError(f"{option} {path}: not writable")
    elif not os.access(parent, os.W_OK | os.X_OK):
        raise OutputError(f"{option} {path}: the directory {parent} is not writable")


def check_output_dir(path: str, option: str) -> None:
    """A directory the run will create files in: existing, or creatable in an existing
    directory."""
    if os.path.exists(path) and not os.path.isdir(path):
        raise OutputError(f"{option} {path}: exists and is not a directory")
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(path) and not os.path.isdir(parent):
        raise OutputError(f"{option} {path}: the directory {parent} does not exist")


_SPECIAL_DIRS = ("/dev", "/proc")


def is_regular_or_absent(path: str) -> bool:
    """Whether files may be placed beside `path` (a default plots directory next to a
    report): not for /dev/stdout and friends, even when the shell sent that stream to a
    regular file (`--out /dev/stdout > report.md` must not create /dev/plots)."""
    parent = os.path.realpath(os.path.dirname(os.path.abspath(path)))
    if any(parent == d or parent.startswith(d + "/") for d in _SPECIAL_DIRS):
        return False
    return not os.path.exists(path) or stat.S_ISREG(os.stat(path).st_mode)


def write_text(path: str, text: str) -> None:
    """`text` at `path` as the module docstring says: atomic for a regular file or a new
    one, in place through a symbolic link, directly to a device or FIFO."""
    if os.path.islink(path) or (os.path.exists(path) and not stat.S_ISREG(os.stat(path).st_mode)):
        if os.path.isdir(path):
            raise OutputError(f"{path}: is a directory")
        with open(path, "w") as f:  # follows the link; never a rename over it
            f.write(text)
        return
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def write_json_atomic(path: str, data) -> None:
    """`data` as JSON at `path` (write_text: atomic where the path allows it)."""
    write_text(path, json.dumps(data, indent=1, default=str))


def write_private(path: str, text: str) -> None:
    """`text` at `path`, readable by its owner only (secrets, keys)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
