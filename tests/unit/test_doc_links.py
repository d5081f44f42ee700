"""The README and docs/ link only to files that exist, and the README stays short."""

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def _pages():
    return [ROOT / "README.md", ROOT / "CHANGES.md", *sorted((ROOT / "docs").rglob("*.md"))]


def test_relative_links_point_to_files_that_exist():
    dead = []
    for page in _pages():
        for target in LINK.findall(page.read_text()):
            if re.match(r"[a-z]+:", target):  # https:, mailto:
                continue
            if not (page.parent / target).exists():
                dead.append(f"{page.relative_to(ROOT)} -> {target}")
    assert not dead, "dead links:\n" + "\n".join(dead)


def test_readme_is_short():
    assert len((ROOT / "README.md").read_text().splitlines()) <= 250
