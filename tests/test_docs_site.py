"""The documentation site's sources list every public module and every tutorial.

The site itself is built by CI (``sphinx-build -W``, see ``.ci/run``); these checks are
the cheap part that needs no Sphinx: the API reference is generated from the module list
in ``docs/api/index.md``, so a public module missing there would silently have no page.
"""

from __future__ import annotations

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parent.parent
API_INDEX = ROOT / "docs" / "api" / "index.md"
TUTORIALS_INDEX = ROOT / "docs" / "tutorials" / "index.md"


def public_modules(package_dir: pathlib.Path) -> set[str]:
    """Dotted names of the modules under ``package_dir`` with no part starting with ``_``."""
    names = set()
    for path in package_dir.rglob("*.py"):
        parts = path.relative_to(package_dir.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if not any(part.startswith("_") for part in parts):
            names.add(".".join(parts))
    return names


def listed_modules(index_text: str, package: str = "learnopt") -> set[str]:
    """The module names listed (indented, one per line) in the API index's autosummary."""
    entry = re.compile(rf"^\s+({package}(?:\.\w+)*)\s*$")
    return {m.group(1) for line in index_text.splitlines() if (m := entry.match(line))}


def missing_and_stale(package_dir: pathlib.Path, index_text: str) -> tuple[set, set]:
    """Public modules not listed, and listed names that are not public modules."""
    public = public_modules(package_dir)
    listed = listed_modules(index_text, package_dir.name)
    return public - listed, listed - public


def test_every_public_module_is_in_the_api_reference():
    missing, stale = missing_and_stale(ROOT / "learnopt", API_INDEX.read_text())
    assert not missing, f"add these modules to {API_INDEX}: {sorted(missing)}"
    assert not stale, f"{API_INDEX} lists modules that do not exist: {sorted(stale)}"
    assert {"learnopt", "learnopt.tasks.base", "learnopt.outer_trainers.truncated_pes"} <= (
        listed_modules(API_INDEX.read_text())
    )


def test_the_check_catches_a_forgotten_and_a_stale_module(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "_private").mkdir()
    for name in ("__init__.py", "a.py", "_hidden.py", "sub/__init__.py", "sub/b.py"):
        (pkg / name).write_text("")
    (pkg / "_private" / "c.py").write_text("")
    index = "```{eval-rst}\n.. autosummary::\n\n   pkg\n   pkg.a\n   pkg.sub\n   pkg.gone\n```\n"
    missing, stale = missing_and_stale(pkg, index)
    assert missing == {"pkg.sub.b"}
    assert stale == {"pkg.gone"}


def test_every_notebook_is_a_tutorial_page():
    notebooks = {path.stem for path in (ROOT / "notebooks").glob("*.ipynb")}
    entries = set(TUTORIALS_INDEX.read_text().split())
    assert len(notebooks) >= 7
    assert notebooks <= entries, f"add to {TUTORIALS_INDEX}: {sorted(notebooks - entries)}"
