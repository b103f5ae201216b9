"""The documentation site's sources list every public module and every tutorial.

The site itself is built by CI (``sphinx-build -W``, see ``.ci/run``); these checks are
the cheap part that needs no Sphinx: the API reference is generated from the module list
in ``docs/api/index.md``, so a public module missing there would silently have no page.
"""

from __future__ import annotations

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parent.parent
API = ROOT / "docs" / "api"
API_INDEX = API / "index.md"
INTERNALS = API / "internals.md"
TUTORIALS_INDEX = ROOT / "docs" / "tutorials" / "index.md"


def api_pages_text() -> str:
    """The text of every page of the API reference (one per group of modules)."""
    return "\n".join(page.read_text() for page in sorted(API.glob("*.md")))


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
    missing, stale = missing_and_stale(ROOT / "learnopt", api_pages_text())
    assert not missing, f"add these modules to a page of {API}: {sorted(missing)}"
    assert not stale, f"{API} lists modules that do not exist: {sorted(stale)}"
    assert {"learnopt", "learnopt.tasks.base", "learnopt.outer_trainers.truncated_pes"} <= (
        listed_modules(api_pages_text())
    )


def test_each_module_is_on_one_api_page_and_internals_stay_out_of_the_navigation():
    pages = {page.name: listed_modules(page.read_text()) for page in sorted(API.glob("*.md"))}
    seen: dict[str, str] = {}
    for name, modules in pages.items():
        for module in modules:
            assert module not in seen, f"{module} is listed on {seen[module]} and {name}"
            seen[module] = name
    assert len(pages) >= 8 and not pages["index.md"]  # the index holds the groups, no modules
    internals = INTERNALS.read_text()
    assert ":toctree:" not in internals  # a table of links: no toctree, so no navigation
    assert {"learnopt.run.session", "learnopt.cli.args"} <= pages["internals.md"]
    for page in set(pages) - {"index.md", "internals.md"}:
        assert f"\n{page.removesuffix('.md')}\n" in API_INDEX.read_text(), page
        assert ":toctree: generated" in (API / page).read_text(), page


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
    assert len(notebooks) >= 7
    # in the site's Tutorials section, and linked from the page that says how to run them
    entries = set(re.findall(r"^tutorials/(\w+)$", (ROOT / "docs" / "index.md").read_text(), re.M))
    assert notebooks <= entries, f"add to docs/index.md: {sorted(notebooks - entries)}"
    links = set(re.findall(r"\]\((\w+)\.ipynb\)", TUTORIALS_INDEX.read_text()))
    assert notebooks <= links, f"link from {TUTORIALS_INDEX}: {sorted(notebooks - links)}"


def _page(body: str, nav: str = "", head: str = "") -> str:
    return (
        f"<html><head>{head}</head><body>"
        f'<nav class="bd-links bd-docs-nav" aria-label="Main"><ul>{nav}</ul></nav>'
        f"{body}</body></html>"
    )


def test_the_site_check_finds_remote_loads_internals_in_the_navigation_and_missing_maths(
    tmp_path, repo_script
):
    check_site = repo_script("docs/check_site.py")
    internals = check_site.internal_modules(INTERNALS)
    assert "learnopt.run.session" in internals and "learnopt.train" not in internals
    site = tmp_path / "html"
    (site / "_static" / "mathjax").mkdir(parents=True)
    (site / "_static" / "mathjax" / "tex-chtml.js").write_text("")
    mathjax = '<script defer="defer" src="_static/mathjax/tex-chtml.js"></script>'
    formulas = '<div class="math notranslate nohighlight">\\(x\\)</div>' * 25
    nav = '<li><a href="api/generated/learnopt.train.html">learnopt.train</a></li>'
    (site / "index.html").write_text(_page("<p>hi</p>", nav))
    (site / "algorithms.html").write_text(_page(formulas, nav, mathjax))
    # the body of the internals page links to internal modules: allowed
    body = '<a href="generated/learnopt.run.session.html">learnopt.run.session</a>'
    (site / "internals.html").write_text(_page(body, nav))
    check_site.MATH_PAGES = {"algorithms.html": 20}  # this fake site has no API pages
    assert check_site.check(site, internals) == []

    cdn = '<script src="https://cdn.jsdelivr.net/npm/mathjax@4/tex-mml-chtml.js"></script>'
    (site / "index.html").write_text(
        _page("<p>hi</p>", nav, cdn + '<link rel="stylesheet" href="//x/y.css">')
    )
    bad_nav = nav + '<li><a href="api/generated/learnopt.run.session.html#x">session</a></li>'
    (site / "tasks.html").write_text(_page("", bad_nav))
    (site / "algorithms.html").write_text(_page(formulas[: len(formulas) // 5], nav))
    long = "x" * 89
    code = f'<div class="highlight"><pre><span>{long[:40]}</span>{long[40:]}\nok</pre></div>'
    (site / "quickstart.html").write_text(_page(code, nav))
    (site / "tutorials").mkdir()
    (site / "tutorials" / "Part1.html").write_text(_page(code, nav))  # notebooks: exempt
    problems = check_site.check(site, internals)
    assert problems == [
        "algorithms.html: 5 formulas shown, at least 20 expected",
        "algorithms.html: its MathJax script is missing (none)",
        "index.html: loads from the network: <script> https://cdn.jsdelivr.net/npm/mathjax@4/tex-mml-chtml.js",
        "index.html: loads from the network: <link> //x/y.css",
        f"quickstart.html: a code line of 89 characters (at most 88): {'x' * 60}...",
        "tasks.html: the navigation links to the internal module learnopt.run.session",
    ]
    assert check_site.main([str(site)]) == 1
    assert check_site.check(tmp_path / "empty", internals) == [
        f"{tmp_path / 'empty'}: no HTML pages (build the site first)"
    ]
