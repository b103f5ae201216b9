"""Sphinx configuration of learnopt's documentation site.

Build it (offline, warnings are errors), from the repository root:

    pip install -e '.[docs]' && sphinx-build -W --keep-going -b html docs docs/_build/html

Sources: ``index.md`` (the README, included), the pages in ``docs/*.md``, the tutorials
(``notebooks/*.ipynb``, copied into ``docs/tutorials/`` when the build starts and rendered
from their stored outputs, never executed) and the API reference (``api/``: one page per
public module, written by ``_ext/learnopt_api.py`` from the lists in ``api/*.md``).
"""

from __future__ import annotations

import os
import pathlib
import shutil
import sys

DOCS = pathlib.Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path.insert(0, str(ROOT))  # document this checkout's learnopt, not an installed copy
sys.path.insert(0, str(DOCS / "_ext"))
os.environ.setdefault("JAX_PLATFORMS", "cpu")  # importing learnopt needs no accelerator

import learnopt  # noqa: E402

project = "learnopt"
author = "learnopt authors"
copyright = "learnopt authors, Apache-2.0"  # noqa: A001
release = version = learnopt.__version__

extensions = [
    "myst_nb",  # Markdown (MyST) pages and notebooks
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",  # Google-style Args: / Returns:
    "sphinx.ext.mathjax",
    "sphinx-mathjax-offline",  # copies MathJax 3 into _static/mathjax: no CDN
    "sphinx.ext.viewcode",
    "learnopt_api",  # docs/_ext/learnopt_api.py: the API pages
]

exclude_patterns = ["_build", "_ext", "**.ipynb_checkpoints", "figures/*.csv", "figures/*.md"]
templates_path: list[str] = []

# --- the tutorials: notebooks/ stays the single source --------------------------------------
# Sphinx reads only files under docs/, so the notebooks are copied into docs/tutorials/
# (ignored by git) at every build; a copy is rewritten only when its notebook changed, and a
# copy whose notebook is gone is removed.
TUTORIALS = DOCS / "tutorials"
_notebooks = sorted((ROOT / "notebooks").glob("*.ipynb"))
for _nb in _notebooks:
    _copy = TUTORIALS / _nb.name
    if not _copy.exists() or _copy.read_bytes() != _nb.read_bytes():
        shutil.copyfile(_nb, _copy)
for _copy in TUTORIALS.glob("*.ipynb"):
    if _copy.name not in {nb.name for nb in _notebooks}:
        _copy.unlink()

nb_execution_mode = "off"  # render the stored outputs; the build never runs a notebook
nb_merge_streams = True

# The formulas render offline: MathJax from the site's own _static/, never from a CDN
# (docs/check_site.py fails a build whose pages load anything from the network).
mathjax_path = "mathjax/tex-chtml.js"

# --- MyST ------------------------------------------------------------------------------------
myst_enable_extensions = ["colon_fence", "dollarmath"]
myst_heading_anchors = 3  # [text](page.md#a-heading) links resolve

# --- autodoc and napoleon --------------------------------------------------------------------
autosummary_generate = False  # the module pages are written by learnopt_api
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_preserve_defaults = True
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_ivar = True  # Attributes: -> :ivar: fields, not duplicate attribute targets
napoleon_use_rtype = False

# Cross-references: learnopt's own (``:class:`Task```, type hints naming learnopt classes)
# must resolve, so nitpicky mode is on. Names from other libraries cannot resolve offline
# (no intersphinx inventories are fetched): they are ignored by the patterns below, which
# name only other projects' modules and the typing vocabulary, never learnopt's.
nitpicky = True
nitpick_ignore_regex = [
    (r"py:.*", r"(jax|jaxlib|jnp|optax|flax|nnx|numpy|np|chex|orbax)(\..*)?"),
    (r"py:.*", r"(tensorflow_datasets|tfds)(\..*)?"),
    (r"py:.*", r"ArrayTree"),  # chex's / optax's alias, as printed in flax's TrainState
    # the standard library's modules (typing, pathlib, difflib, ...)
    (r"py:.*", rf"({'|'.join(sorted(sys.stdlib_module_names))})(\..*)?"),
    (r"py:.*", r"(matplotlib|array_record|sklearn|mlxtend|tqdm|msgpack)(\..*)?"),
    (r"py:.*", r"(Any|Callable|Iterable|Iterator|Mapping|Sequence|Optional|Union|TypeVar)"),
    (r"py:.*", r"learnopt(\.\w+)*\.[TF]"),  # type variables (``T = TypeVar("T")``, ``F``)
    (r"py:class", r"(int|float|str|bool|bytes|dict|list|tuple|set|object|type|None|Ellipsis)"),
]

# --- HTML ------------------------------------------------------------------------------------
html_theme = "sphinx_book_theme"
html_title = f"learnopt {release}"
html_theme_options = {"show_toc_level": 2}
html_static_path: list[str] = []
