"""Package faces that re-export their modules' public names, imported on first use.

A package such as :mod:`learnopt.evaluation` offers the names its modules declare in
``__all__`` (``evaluation.evaluate_suite`` for ``evaluation.runner.evaluate_suite``)
without importing those modules, and so JAX, until a name is used (PEP 562). The names
come from the modules themselves: each module's ``__all__`` is read from its source
(not imported), and the names it defines there (not those it re-exports from another
module) are the face's. Nothing is listed twice by hand.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any


def defined_names(module: str) -> list[str]:
    """The names of ``module``'s ``__all__`` that it defines itself, read from its source.

    Args:
      module: a dotted module name whose ``__all__`` is a literal list or tuple.

    Returns:
      The names it assigns, defines (``def``, ``class``) or declares with an annotation
      at top level, in ``__all__``'s order; names it imports or binds to another name
      (``X = module.X``, an alias) are left out.

    Raises:
      ImportError: the module has no source or no literal ``__all__``.
    """
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        raise ImportError(f"{module}: no Python source to read __all__ from")
    tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
    declared, own = None, set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            own.add(node.name)
        elif isinstance(node, ast.Assign):
            targets = [t.id for t in node.targets if isinstance(t, ast.Name)]
            if "__all__" in targets:
                declared = ast.literal_eval(node.value)
            elif not isinstance(node.value, (ast.Name, ast.Attribute)):
                own.update(targets)  # ``X = other.X`` is a re-export, not a definition
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            own.add(node.target.id)
    if declared is None:
        raise ImportError(f"{module}: no literal __all__")
    return [name for name in declared if name in own]


def lazy_face(
    package: str, modules: Sequence[str]
) -> tuple[list[str], Callable[[str], Any], Callable[[], list[str]]]:
    """``__all__``, ``__getattr__`` and ``__dir__`` for a package that re-exports the
    names its ``modules`` define (see :func:`defined_names`), importing each on first use.

    Args:
      package: the package's name (for messages).
      modules: the dotted names of the modules whose names it offers.

    Returns:
      ``(names, __getattr__, __dir__)``, to assign in the package's ``__init__``.

    Raises:
      ImportError: two modules define the same public name.
    """
    where: dict[str, str] = {}
    for module in modules:
        for name in defined_names(module):
            if name in where:
                raise ImportError(f"{package}: {name} is defined by {where[name]} and {module}")
            where[name] = module
    namespace = importlib.import_module(package).__dict__

    def __getattr__(name: str) -> Any:
        if name not in where:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(where[name]), name)
        namespace[name] = value  # later lookups skip this function
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(where))

    return sorted(where), __getattr__, __dir__
