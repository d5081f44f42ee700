"""Files written safely: private (0600 from the start) and atomic (write, then rename)."""

import json
import os
import tempfile


def write_json_atomic(path: str, data) -> None:
    """`data` as JSON at `path`; a reader sees the old file or the new one, never half."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-")
    with os.fdopen(fd, "w") as f:
        json.dump(data, f, indent=1, default=str)
    os.replace(tmp, path)


def write_private(path: str, text: str) -> None:
    """`text` at `path`, readable by its owner only (secrets, keys)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
