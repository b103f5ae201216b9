"""The old path of :mod:`learnopt.run.recipes`, the recipe tables, kept for existing
callers: the same objects, re-exported."""

from learnopt.run.recipes import *  # noqa: F403
from learnopt.run.recipes import __all__  # noqa: F401
