"""Checks a built documentation site: offline, internals out of the navigation, maths shown.

    python docs/check_site.py docs/_build/html   # after a fresh build (as CI makes)

Run by ``.ci/run`` after ``sphinx-build``. Fails (exit 1, one line per problem) when

* a page loads anything from the network: a ``<script src>``, a stylesheet or preloaded
  ``<link href>``, an ``<img src>`` or an ``<iframe src>`` that starts with ``http:``,
  ``https:`` or ``//`` (the site must work offline; MathJax is served from ``_static``);
* the main navigation (the sidebar ``<nav class="bd-links ...">``) of any page links to the
  page of a module listed in ``docs/api/internals.md``;
* a page of :data:`MATH_PAGES` shows fewer formulas than it should (``class="math"``
  elements: the algorithms' maths must render), or the MathJax script it loads is missing;
* a code block of a guide or an API page (not the tutorials' stored notebook cells and
  outputs, not the highlighted source pages) has a line longer than :data:`CODE_WIDTH`
  characters: at a 1280-px-wide window the theme shows about that many before a block
  scrolls, and a clipped command is a command that gets copied wrong.
"""

from __future__ import annotations

import html.parser
import pathlib
import re
import sys

DOCS = pathlib.Path(__file__).resolve().parent
#: Pages whose maths is their point, and the fewest formulas each must show: the
#: Algorithms page and the API page of every estimator, meta-objective and architecture.
MATH_PAGES = {
    "algorithms.html": 20,
    **{
        f"api/generated/learnopt.{module}.html": 1
        for module in (
            *(
                f"outer_trainers.{m}"
                for m in (
                    "truncated_pes",
                    "truncated_es",
                    "noise_reuse_es",
                    "truncated_grad",
                    "full_es",
                    "full_grad",
                    "meta_objective",
                )
            ),
            *(
                f"learned_optimizers.{m}"
                for m in (
                    "scheduled_adam",
                    "mlp_lopt",
                    "adafac_mlp_lopt",
                    "adafac_nominal",
                    "nn_adam",
                    "rnn_mlp_lopt",
                    "hyper_v2",
                    "celo",
                    "celo_adam",
                    "celo2",
                    "controlled_adam",
                    "blocks.progress",
                )
            ),
        )
    },
}
#: The longest code line a guide or API page may show (characters).
CODE_WIDTH = 88
#: Pages whose code blocks are not checked for width: stored notebook cells and outputs,
#: and the highlighted source of each module.
_WIDTH_EXEMPT = ("tutorials/", "_modules/")
_REMOTE = re.compile(r"^(https?:)?//", re.IGNORECASE)
_ENTRY = re.compile(r"^\s+(learnopt(?:\.\w+)*)\s*$")


class _Page(html.parser.HTMLParser):
    """Collects a page's remote resources, its main navigation's links and its formulas."""

    def __init__(self) -> None:
        super().__init__()
        self.remote: list[str] = []
        self.nav_links: list[str] = []
        self.scripts: list[str] = []
        self.formulas = 0
        self.code_lines: list[str] = []  # the text lines of <pre> blocks
        self._nav_depth = 0  # >0 inside the main navigation
        self._pre_depth = 0
        self._pre_text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        classes = a.get("class", "").split()
        if tag == "nav":
            if self._nav_depth or "bd-links" in classes:
                self._nav_depth += 1
        elif tag == "a" and self._nav_depth:
            self.nav_links.append(a.get("href", ""))
        if tag == "pre":
            self._pre_depth += 1
        if "math" in classes:
            self.formulas += 1
        url = ""
        if tag in ("script", "img", "iframe"):
            url = a.get("src", "")
        elif tag == "link" and set(a.get("rel", "").split()) & {"stylesheet", "preload"}:
            url = a.get("href", "")
        if tag == "script" and url:
            self.scripts.append(url)
        if url and _REMOTE.match(url):
            self.remote.append(f"<{tag}> {url}")

    def handle_endtag(self, tag: str) -> None:
        if tag == "nav" and self._nav_depth:
            self._nav_depth -= 1
        if tag == "pre" and self._pre_depth:
            self._pre_depth -= 1
            if not self._pre_depth:
                self.code_lines += "".join(self._pre_text).splitlines()
                self._pre_text = []

    def handle_data(self, data: str) -> None:
        if self._pre_depth:
            self._pre_text.append(data)


def internal_modules(internals: pathlib.Path) -> set[str]:
    """The modules listed on the internals page (kept out of the navigation).

    Args:
      internals: ``docs/api/internals.md``.

    Returns:
      Their dotted names.
    """
    return {m.group(1) for line in internals.read_text().splitlines() if (m := _ENTRY.match(line))}


def check(site: pathlib.Path, internals: set[str]) -> list[str]:
    """The problems of the built site in ``site`` (empty: it passes).

    Args:
      site: the HTML output folder of ``sphinx-build``.
      internals: modules whose pages must not be in the main navigation.

    Returns:
      One line per problem.
    """
    problems = []
    pages = sorted(site.rglob("*.html"))
    if not pages:
        return [f"{site}: no HTML pages (build the site first)"]
    for path in pages:
        rel = path.relative_to(site).as_posix()
        page = _Page()
        page.feed(path.read_text(errors="replace"))
        problems += [f"{rel}: loads from the network: {r}" for r in page.remote]
        for href in page.nav_links:
            stem = href.split("#")[0].rsplit("/", 1)[-1].removesuffix(".html")
            if stem in internals:
                problems.append(f"{rel}: the navigation links to the internal module {stem}")
        if not rel.startswith(_WIDTH_EXEMPT):
            for line in page.code_lines:
                if len(line) > CODE_WIDTH:
                    problems.append(
                        f"{rel}: a code line of {len(line)} characters (at most {CODE_WIDTH}): "
                        f"{line[:60]}..."
                    )
        if rel in MATH_PAGES:
            if page.formulas < MATH_PAGES[rel]:
                problems.append(
                    f"{rel}: {page.formulas} formulas shown, at least {MATH_PAGES[rel]} expected"
                )
            local = [s for s in page.scripts if "mathjax" in s.lower()]
            if not local or not all((path.parent / s).resolve().is_file() for s in local):
                problems.append(f"{rel}: its MathJax script is missing ({local or 'none'})")
    for name in MATH_PAGES:
        if not (site / name).is_file():
            problems.append(f"{name}: not built")
    return problems


def main(argv: list[str]) -> int:
    """Checks the site in ``argv[0]``; prints each problem; 0 when there is none."""
    if len(argv) != 1:
        print("usage: python docs/check_site.py SITE_DIR", file=sys.stderr)
        return 2
    problems = check(pathlib.Path(argv[0]), internal_modules(DOCS / "api" / "internals.md"))
    for line in problems:
        print(f"check_site: {line}", file=sys.stderr)
    print(f"check_site: {'FAILED' if problems else 'passed'} ({len(problems)} problems)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
