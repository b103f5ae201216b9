"""Every public class and function documents its arguments (Google style), and says what it
returns.

The API reference is built from these docstrings, so a parameter missing from ``Args:`` is a
parameter missing from the reference. What is checked:

* public modules are those with no ``_`` component in their name; each declares its names in
  ``__all__``, or is a package ``__init__`` that only imports its submodules (its public names
  are theirs) and binds no class or function of its own; a class or function that a public
  module defines under a public name is in its ``__all__``;
* every class and function in a public module's ``__all__`` (once, where it is defined,
  re-exports from private modules included) has a docstring; a function documents each
  parameter in ``Args:``; a class documents its constructor's parameters in ``Args:`` (class
  or ``__init__`` docstring), a dataclass (plain, ``flax.struct`` or ``flax.linen.Module``,
  whose ``parent``/``name`` are Flax's) or ``NamedTuple`` its fields in ``Attributes:`` (or
  with Sphinx's ``#:`` comments);
* the public methods (and ``__call__``) that those classes define document their parameters
  too; an override without a docstring is documented by the method it overrides, as in the
  reference, and so is an override whose docstring has no ``Args:`` and names that method
  (``:meth:`~learnopt.optimizers.interface.Optimizer.update```): the arguments are
  written once, on the interface; likewise a class without ``Args:`` that inherits its
  constructor (or defines one without ``Args:``, to reorder or add to them) and names
  the class it takes them from (``:class:`Base```) has that class's ``Args:``; a
  function without ``Args:`` that names a function of its module (``:func:`other```)
  has that function's; a dataclass that names its dataclass base (``:class:`Base```)
  has that base's fields documented by it; public properties have a docstring;
* a function or method whose return annotation is not ``None`` has a ``Returns:`` (or
  ``Yields:``) section.

``*args``, ``**kwargs``, ``self``, ``cls`` and ``_private`` parameters need no entry. Entries
are read as Google style: ``name: ...``, ``name (type): ...`` and grouped ``a, b: ...``, at the
first indentation of the section; an entry that only points elsewhere ("as :class:`X`")
documents nothing. The test only imports modules, so it takes seconds.
"""

from __future__ import annotations

import ast
import dataclasses
import enum
import importlib
import inspect
import pkgutil
import re
import sys
import textwrap
import types
from collections.abc import Callable, Iterator
from typing import Any

import flax.linen as nn
import pytest

import learnopt

_ARG_SECTIONS = {
    "Args",
    "Arguments",
    "Attributes",
    "Parameters",
    "Keyword Args",
    "Keyword Arguments",
    "Other Parameters",
}
_RETURN_SECTIONS = {"Returns", "Return", "Yields", "Yield"}
_SECTION = re.compile(r"^([A-Z][A-Za-z ]*):\s*$")
_ENTRY = re.compile(r"^(\*{0,2}\w+(?:\s*,\s*\*{0,2}\w+)*)\s*(?:\(.*?\))?\s*:(?:\s|$)")
_CROSS_REFERENCE = re.compile(
    r"^(?:as|see|same as)(?: for| in)? (?::\w+:)?`[^`]+`+(?:'s)?\.?$", re.IGNORECASE
)
_NO_RETURN = {"None", "NoReturn", "Never", "typing.NoReturn", "typing.Never"}


def public_modules() -> list[str]:
    """The names of learnopt's public modules: no ``_`` component, sorted."""
    names = ["learnopt"]
    for info in pkgutil.walk_packages(learnopt.__path__, "learnopt."):
        if not any(part.startswith("_") for part in info.name.split(".")):
            names.append(info.name)
    return sorted(names)


def _sections(doc: str | None) -> dict[str, list[str]]:
    """A docstring's Google-style sections: header -> the lines under it."""
    found: dict[str, list[str]] = {}
    current: list[str] | None = None
    indent = 0
    for line in inspect.cleandoc(doc or "").splitlines():
        stripped = line.strip()
        depth = len(line) - len(line.lstrip())
        header = _SECTION.match(stripped)
        if header and header.group(1) in _ARG_SECTIONS | _RETURN_SECTIONS:
            current = found.setdefault(header.group(1), [])
            indent = depth
            continue
        if current is None or not stripped:
            continue
        if depth <= indent:
            current = None
            continue
        current.append(line)
    return found


def documented_names(doc: str | None) -> set[str]:
    """The parameter names that a docstring's ``Args:``-like sections document.

    An entry whose whole description only points elsewhere ("as :class:`X`", "see
    :func:`f`") documents nothing: the reader would need a second look-up.
    """
    names: set[str] = set()
    for header, lines in _sections(doc).items():
        if header not in _ARG_SECTIONS or not lines:
            continue
        first = min(len(line) - len(line.lstrip()) for line in lines)
        entries: list[tuple[list[str], list[str]]] = []
        for line in lines:
            if len(line) - len(line.lstrip()) == first:
                entry = _ENTRY.match(line.strip())
                group = entry.group(1).split(",") if entry else []
                rest = line.strip()[entry.end() :] if entry else ""
                entries.append(([n.strip().lstrip("*") for n in group], [rest]))
            elif entries:
                entries[-1][1].append(line.strip())
        for group, description in entries:
            if not _CROSS_REFERENCE.match(" ".join(description).strip()):
                names.update(group)
    return names


def has_returns(doc: str | None) -> bool:
    """Whether a docstring has a non-empty ``Returns:`` or ``Yields:`` section."""
    return any(lines for h, lines in _sections(doc).items() if h in _RETURN_SECTIONS)


def comment_documented(cls: type) -> set[str]:
    """The class attributes that carry a Sphinx ``#:`` comment (before, or on their line)."""
    try:
        source = textwrap.dedent("".join(inspect.getsourcelines(cls)[0]))
    except (OSError, TypeError):
        return set()
    lines = source.splitlines()
    names: set[str] = set()
    for node in ast.parse(source).body[0].body:
        target = node.target if isinstance(node, ast.AnnAssign) else None
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
        if not isinstance(target, ast.Name):
            continue
        before = lines[node.lineno - 2].strip() if node.lineno >= 2 else ""
        if "#:" in lines[node.lineno - 1] or before.startswith("#:"):
            names.add(target.id)
    return names


def _parameters(fn: Callable[..., Any], *, bound: bool) -> list[str]:
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return []
    if bound and params and params[0].kind != params[0].VAR_POSITIONAL:
        params = params[1:]
    return [
        p.name
        for p in params
        if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        and p.name not in ("self", "cls")
        and not p.name.startswith("_")
    ]


def _returns_value(fn: Callable[..., Any]) -> bool:
    try:
        annotation = inspect.signature(fn).return_annotation
    except (TypeError, ValueError):
        return False
    if annotation is inspect.Signature.empty or annotation is None:
        return False
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", "")
    return text not in _NO_RETURN


def public_objects() -> dict[str, Any]:
    """Each class and function in a public module's ``__all__``, once, by defining name."""
    found: dict[int, tuple[str, Any]] = {}
    for module_name in public_modules():
        module = importlib.import_module(module_name)
        for name in getattr(module, "__all__", ()):
            obj = getattr(module, name)
            if not (inspect.isclass(obj) or inspect.isfunction(obj)):
                continue
            home = getattr(obj, "__module__", "")
            if not home.startswith("learnopt"):
                continue
            qualified = f"{home}.{obj.__qualname__}"
            # The name where it is defined wins over a re-export.
            if id(obj) not in found or home == module_name:
                found[id(obj)] = (qualified, obj)
    return dict(sorted(found.values(), key=lambda item: item[0]))


def _names_class(doc: str, cls: type) -> bool:
    """Whether ``doc`` names ``cls`` in a ``:class:`` reference."""
    return re.search(rf":class:`~?(?:[\w.]*\.)?{cls.__name__}`", doc) is not None


def _constructor(cls: type) -> tuple[list[str], str]:
    """A class's constructor parameters and the docstrings that may document them."""
    doc = cls.__doc__ or ""
    if dataclasses.is_dataclass(cls):
        skip = {"parent", "name"} if issubclass(cls, nn.Module) else set()
        fields = [
            f.name
            for f in dataclasses.fields(cls)
            if f.init and f.name not in skip and not f.name.startswith("_")
        ]
    elif issubclass(cls, tuple) and hasattr(cls, "_fields"):
        fields = list(cls._fields)
    else:
        fields = None
    if fields is not None:
        commented = comment_documented(cls)
        for base in cls.__mro__[1:]:  # fields a named dataclass base documents
            if dataclasses.is_dataclass(base) and _names_class(doc, base):
                commented |= {f.name for f in dataclasses.fields(base)}
        return [f for f in fields if f not in commented], doc
    if issubclass(cls, (enum.Enum, BaseException)):
        return [], doc
    for base in cls.__mro__:
        if base is object:
            break
        if "__init__" in vars(base):
            init = vars(base)["__init__"]
            docs = f"{doc}\n\n{init.__doc__ or ''}"
            if not _sections(docs).get("Args"):  # "Arguments as :class:`Base`'s"
                named = (b for b in cls.__mro__[1:] if _names_class(doc, b))
                docs += "".join(f"\n\n{b.__doc__ or ''}" for b in named)
            return _parameters(init, bound=True), docs
        if "__new__" in vars(base):
            return _parameters(cls, bound=False), doc
    return [], doc


def _methods(cls: type) -> Iterator[tuple[str, Callable[..., Any], bool]]:
    """The public methods ``cls`` defines itself, ``__call__`` too: (name, function, bound)."""
    for name, attr in vars(cls).items():
        if name.startswith("_") and name != "__call__":
            continue
        bound = not isinstance(attr, staticmethod)
        fn = attr.__func__ if isinstance(attr, (staticmethod, classmethod)) else attr
        if not inspect.isfunction(fn) or not fn.__module__.startswith("learnopt"):
            continue
        yield name, fn, bound


def undocumented_properties(cls: type) -> list[str]:
    """The public properties ``cls`` defines without a docstring (its own or inherited)."""
    found = []
    for name, attr in vars(cls).items():
        if name.startswith("_") or not isinstance(attr, property):
            continue
        if not any(
            (getattr(vars(base).get(name), "__doc__", None) or "").strip() for base in cls.__mro__
        ):
            found.append(name)
    return found


_METHOD_REFERENCE = re.compile(r":meth:`[~!]?(?:[\w.]*\.)?(\w+)\.(\w+)`")


def method_doc(cls: type, name: str) -> str | None:
    """The docstring that documents method ``name`` of ``cls``.

    Its own (or, without one, the inherited one ``inspect.getdoc`` finds); where its own
    has no ``Args:`` section and names the method it overrides (``:meth:`Base.name```,
    ``Base`` a class of ``cls``'s MRO), that method's docstring after its own.

    Args:
      cls: the class.
      name: one of its methods.

    Returns:
      The docstring to check, or None.
    """
    doc = inspect.getdoc(getattr(cls, name))
    if not doc or _sections(doc).get("Args"):
        return doc
    bases = {base.__name__: base for base in cls.__mro__[1:]}
    for owner, method in _METHOD_REFERENCE.findall(doc):
        if method == name and owner in bases and name in vars(bases[owner]):
            inherited = inspect.getdoc(getattr(bases[owner], name))
            return f"{doc}\n\n{inherited or ''}"
    return doc


_FUNCTION_REFERENCE = re.compile(r":func:`~?(?:[\w.]*\.)?(\w+)`")


def function_doc(fn: Callable[..., Any]) -> str | None:
    """The docstring that documents function ``fn``.

    Its own; where it has no ``Args:`` section and names a function of its module
    (``:func:`other```), whose arguments it takes ("As :func:`other`, ..."), that
    function's docstring after its own.

    Args:
      fn: the function.

    Returns:
      The docstring to check, or None.
    """
    doc = fn.__doc__
    if not doc or _sections(doc).get("Args"):
        return doc
    module = sys.modules.get(fn.__module__)
    for name in _FUNCTION_REFERENCE.findall(doc):
        other = getattr(module, name, None)
        if inspect.isfunction(other) and other is not fn:
            return f"{doc}\n\n{other.__doc__ or ''}"
    return doc


def missing(
    objects: dict[str, Any] | None = None,
) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """What is undocumented: (name -> undocumented parameters, name -> missing sections).

    Args:
      objects: qualified name -> class or function to check; default
        :func:`public_objects`.

    Returns:
      Two dicts: name -> its undocumented parameters (or ``<no docstring>``), and name ->
      the sections it lacks (``Returns``).
    """
    params: dict[str, list[str]] = {}
    sections: dict[str, list[str]] = {}

    def check(name: str, fn: Callable[..., Any], wanted: list[str], doc: str | None) -> None:
        if not (doc or "").strip():
            params[name] = ["<no docstring>"]
            return
        undocumented = [p for p in wanted if p not in documented_names(doc)]
        if undocumented:
            params[name] = undocumented
        if fn is not None and _returns_value(fn) and not has_returns(doc):
            sections.setdefault(name, []).append("Returns")

    for name, obj in (public_objects() if objects is None else objects).items():
        if inspect.isfunction(obj):
            check(name, obj, _parameters(obj, bound=False), function_doc(obj))
            continue
        wanted, doc = _constructor(obj)
        check(name, None, wanted, doc)
        for prop in undocumented_properties(obj):
            params[f"{name}.{prop}"] = ["<no docstring>"]
        for method_name, fn, bound in _methods(obj):
            check(
                f"{name}.{method_name}",
                fn,
                _parameters(fn, bound=bound),
                method_doc(obj, method_name),
            )
    return params, sections


def test_public_modules_declare_their_names():
    """Each public module has ``__all__`` or is a package that only imports submodules."""
    bad = []
    for module_name in public_modules():
        module = importlib.import_module(module_name)
        if hasattr(module, "__all__"):
            unknown = [n for n in module.__all__ if not hasattr(module, n)]
            if unknown:
                bad.append(f"{module_name}: __all__ names {unknown} that it lacks")
            continue
        own = sorted(
            name
            for name, value in vars(module).items()
            if not name.startswith("_") and (inspect.isclass(value) or inspect.isfunction(value))
        )
        if not hasattr(module, "__path__") or own:
            bad.append(f"{module_name}: no __all__ (binds {own or 'names'})")
    assert not bad, "public modules without a declared API:\n" + "\n".join(bad)


def test_public_names_are_in_all():
    """A class or function a public module defines without ``_`` is in its ``__all__``."""
    bad = []
    for module_name in public_modules():
        module = importlib.import_module(module_name)
        declared = set(getattr(module, "__all__", ()))
        for name, value in vars(module).items():
            if name.startswith("_") or name in declared:
                continue
            if (inspect.isclass(value) or inspect.isfunction(value)) and (
                getattr(value, "__module__", None) == module_name
            ):
                bad.append(f"{module_name}.{name}")
    assert not bad, "public but not in __all__ (add it, or prefix _):\n" + "\n".join(bad)


@pytest.fixture(scope="module")
def gaps():
    return missing()


def test_every_parameter_is_documented(gaps):
    params, _ = gaps
    lines = [f"{name}: {', '.join(names)}" for name, names in params.items()]
    assert not lines, f"{len(lines)} public names with undocumented parameters:\n" + "\n".join(
        lines
    )


def test_return_values_are_documented(gaps):
    _, sections = gaps
    lines = sorted(sections)
    assert not lines, f"{len(lines)} public functions or methods lack Returns:\n" + "\n".join(lines)


@pytest.mark.parametrize(
    "doc, names",
    [
        ("One line.\n\nArgs:\n  a: x.\n  b (int): y.\n    more about b\n  c, d: z.\n", "abcd"),
        ("S.\n\nAttributes:\n    x: the x.\n\nReturns:\n    y.\n", "x"),
        ("S.\n\nArgs:\n  a: see\n    b: not an entry\n", "a"),
        (
            "S.\n\nArgs:\n  *args: rest.\n  **kw (dict): more.\nNotes:\n  e: not an arg\n",
            ["args", "kw"],
        ),
        ("No sections; a: b.\n", ""),
        (
            "S.\n\nArgs:\n  a: as :class:`X`.\n  b: see\n    :func:`f`\n  c: as ``X``, but more.\n",
            "c",
        ),
    ],
)
def test_parser(doc, names):
    assert documented_names(doc) == set(names)


def test_parser_returns():
    assert has_returns("Summary.\n\nReturns:\n  The value.\n")
    assert has_returns("S.\n\nYields:\n  Batches.\n")
    assert not has_returns("Summary.\n\nReturns:\n\nArgs:\n  a: x.\n")
    assert not has_returns("Summary; returns the value.\n")


def test_checker_finds_gaps():
    """The checker reports each kind of gap it looks for (so the tests above can fail)."""

    def f(alpha: int, beta: int) -> int:
        """Adds.

        Args:
          alpha: the first.
        """
        return alpha + beta

    class C:
        """A class.

        Args:
          x: documented.
          y: as :class:`C`.
        """

        def __init__(self, x: int, y: int):
            del x, y

        def go(self, z: int) -> None:
            """Goes (no Args:)."""
            del z

        def get(self) -> int:
            """Gets.

            Args: none.
            """
            return 0

        @property
        def size(self) -> int:
            return 1

    @dataclasses.dataclass
    class D:
        """Fields.

        Attributes:
          a: the a.
        """

        a: int
        b: int
        c: int  #: documented for Sphinx by its comment

    class M(nn.Module):
        """A module.

        Attributes:
          width: the width.
        """

        width: int

    for fn in (C.go, C.get):
        fn.__module__ = "learnopt.fake"
    objects = {"learnopt.fake.f": f, "learnopt.fake.C": C, "learnopt.fake.D": D}
    params, sections = missing({**objects, "learnopt.fake.M": M})
    assert params == {
        "learnopt.fake.f": ["beta"],
        "learnopt.fake.C": ["y"],
        "learnopt.fake.C.size": ["<no docstring>"],
        "learnopt.fake.C.go": ["z"],
        "learnopt.fake.D": ["b"],
    }
    assert sections == {"learnopt.fake.f": ["Returns"], "learnopt.fake.C.get": ["Returns"]}


def test_override_naming_its_method_is_documented_by_it():
    """An override with no ``Args:`` that names the method it overrides takes its Args and
    Returns; one that names another method, or nothing, does not."""

    class Base:
        """A base.

        Args: none.
        """

        def step(self, state: int, grads: int) -> int:
            """A step.

            Args:
              state: the state.
              grads: the gradients.

            Returns:
              The next state.
            """
            return state + grads

    class Named(Base):
        """Names its base."""

        def step(self, state: int, grads: int) -> int:
            """Its own step; the arguments as :meth:`~x.Base.step`."""
            return state

    class Other(Base):
        """Names another method."""

        def step(self, state: int, grads: int) -> int:
            """Its own step; see :meth:`Base.other`."""
            return state

    class Extra(Base):
        """Adds a parameter the base does not document."""

        def step(self, state: int, grads: int, scale: int = 1) -> int:
            """Scaled; the rest as :meth:`Base.step`."""
            return state * scale

    for cls in (Named, Other, Extra):
        cls.step.__module__ = "learnopt.fake"
    params, sections = missing({"Named": Named, "Other": Other, "Extra": Extra})
    assert params == {"Other.step": ["state", "grads"], "Extra.step": ["scale"]}
    assert sections == {"Other.step": ["Returns"]}


def test_a_class_naming_the_class_it_inherits_its_constructor_from_takes_its_args():
    class Base:
        """A base.

        Args:
          width: the width.
        """

        def __init__(self, width: int):
            self.width = width

    class Named(Base):
        """Arguments as :class:`~x.Base`'s."""

    class Silent(Base):
        """Says nothing of its arguments."""

    class Reordered(Base):
        """Arguments as :class:`Base`'s, and ``depth``."""

        def __init__(self, depth: int, width: int, extra: int = 0):
            super().__init__(width)

    params, _ = missing({"Named": Named, "Silent": Silent, "Reordered": Reordered})
    assert params == {"Silent": ["width"], "Reordered": ["depth", "extra"]}


def test_a_dataclass_naming_its_base_has_the_bases_fields_documented():
    @dataclasses.dataclass
    class Base:
        """A base.

        Attributes:
          a: the a.
        """

        a: int

    @dataclasses.dataclass
    class Named(Base):
        """:class:`Base`'s fields and one more.

        Attributes:
          b: the b.
        """

        b: int

    @dataclasses.dataclass
    class Silent(Base):
        """Does not name its base.

        Attributes:
          b: the b.
        """

        b: int

    params, _ = missing({"Named": Named, "Silent": Silent})
    assert params == {"Silent": ["a"]}


def test_a_function_naming_a_function_of_its_module_takes_its_args():
    def fake_module_function(value: int, scale: int = 2) -> int:
        """Scales.

        Args:
          value: the value.
          scale: the factor.

        Returns:
          The product.
        """
        return value * scale

    def named(value: int) -> int:
        """As :func:`fake_module_function` with scale 3."""
        return value * 3

    def silent(value: int) -> int:
        """Says nothing of its argument."""
        return value

    module = types.ModuleType("learnopt_fake_docs")
    module.fake_module_function = fake_module_function
    for fn in (fake_module_function, named, silent):
        fn.__module__ = module.__name__
    sys.modules[module.__name__] = module
    try:
        params, sections = missing({"named": named, "silent": silent})
    finally:
        del sys.modules[module.__name__]
    assert params == {"silent": ["value"]}
    assert sections == {"silent": ["Returns"]}
