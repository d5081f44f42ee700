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
    for f in setup.py pyproject.toml mongobench/client-requirements.txt; do
      [ "$root/$f" -nt "$stamp" ] && { "$root/scripts/setup"; return; }
    done
    return 0
  fi
  "$root/scripts/setup"
}
