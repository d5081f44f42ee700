# Sourced by the scripts: the project's Python and its .venv.

# The first Python >= 3.10 of $PYTHON, python3.12 (PKB's), python3.13, python3.
pick_python() {
  local p
  for p in "${PYTHON:-}" python3.12 python3.13 python3; do
    [ -n "$p" ] && command -v "$p" >/dev/null 2>&1 || continue
    if "$p" -c 'import sys; sys.exit(sys.version_info < (3, 10))' 2>/dev/null; then
      echo "$p"; return
    fi
  done
  echo "no Python >= 3.10 found (set PYTHON=...)" >&2
  return 1
}

# Runs scripts/setup when .venv is missing, half-made (no stamp) or older than
# what it was made from; a few file tests when it is current.
ensure_setup() {
  local root stamp f
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
  stamp="$root/.venv/.setup-done"
  if [ -x "$root/.venv/bin/python" ] && [ -f "$stamp" ]; then
    for f in setup.py pyproject.toml mongobench/client-requirements.txt requirements/dev.lock \
      mongobench/driver/_loop.c mongobench/driver/_loop_bson.c \
      mongobench/driver/_loop_sources.c mongobench/driver/_loop_docs.c \
      mongobench/driver/_loop.h; do
      [ "$root/$f" -nt "$stamp" ] && { "$root/scripts/setup"; return; }
    done
    return 0
  fi
  "$root/scripts/setup"
}

# A Python 3.12 (PKB's: it imports typing.override, absent from 3.11): $PYTHON312,
# python3.12 on PATH (a pyenv shim counts only if it runs), else pyenv's newest 3.12.x.
python312() {
  local p root
  local is312='import sys; sys.exit(sys.version_info[:2] != (3, 12))'
  for p in "${PYTHON312:-}" python3.12; do
    if [ -n "$p" ] && "$p" -c "$is312" 2>/dev/null; then
      "$p" -c 'import sys; print(sys.executable)'; return
    fi
  done
  root="$(pyenv root 2>/dev/null || echo "${PYENV_ROOT:-$HOME/.pyenv}")"
  for p in $(ls -d "$root"/versions/3.12*/bin/python3.12 2>/dev/null | sort -rV); do
    if "$p" -c "$is312" 2>/dev/null; then echo "$p"; return; fi
  done
  echo "no Python 3.12 found (PKB needs it): put python3.12 on PATH, install it with pyenv" \
    "(pyenv install 3.12) or set PYTHON312=/path/to/python3.12" >&2
  return 1
}
