"""Writes the API reference pages, one per public module of learnopt, before Sphinx reads.

The modules come from the ``autosummary`` lists of the pages in ``docs/api/`` (one page per
group of modules; a new module is added to one of them, and ``tests/test_docs_site.py``
checks that together they name every public module; ``internals.md`` lists the modules kept
out of the navigation).
Each page documents, with autodoc, the classes, functions and constants its module defines
(or re-exports from a private module), in the order of the module's ``__all__``. A name that
a module re-exports from another public module is listed as a link to the page where it is
documented, not documented twice: one object, one target, so every cross-reference
resolves to exactly one place.

Pages go to ``docs/api/generated/`` (ignored by git) and are rewritten only when their text
changes, so an unchanged module is not re-read by an incremental build.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import importlib
import inspect
import pathlib
import re
import types

from docutils import nodes
from sphinx.addnodes import pending_xref
from sphinx.application import Sphinx
from sphinx.environment import BuildEnvironment
from sphinx.util import logging
from sphinx.util.nodes import make_refnode

logger = logging.getLogger(__name__)

API_DIR = "api"
OUT_DIR = "generated"
#: The page that lists the internal modules: their pages are written (cross-references
#: resolve to them) but marked orphan, so that no toctree, and so no navigation, holds them.
INTERNALS = "internals.md"

_ENTRY = re.compile(r"^\s+(learnopt(?:\.\w+)*)\s*$")


def listed_modules(index: pathlib.Path) -> list[str]:
    """The module names listed, one per line, in the autosummary blocks of ``index``.

    Args:
      index: path of one page of ``docs/api/`` (``tasks.md``, ``internals.md``, ...).

    Returns:
      The dotted module names in the order they are listed.
    """
    return [m.group(1) for line in index.read_text().splitlines() if (m := _ENTRY.match(line))]


def _is_private(dotted: str) -> bool:
    return any(part.startswith("_") for part in dotted.split("."))


def _public_names(module: types.ModuleType) -> list[str]:
    """``__all__``, then the public classes and functions the module defines outside it."""
    names = getattr(module, "__all__", None)
    if names is None:
        names = [
            n
            for n, v in vars(module).items()
            if not n.startswith("_") and not isinstance(v, types.ModuleType)
        ]
    names = [n for n in names if not isinstance(getattr(module, n), types.ModuleType)]
    for name in _defined_names(module):
        obj = getattr(module, name, None)
        if (
            not name.startswith("_")
            and name not in names
            and (inspect.isclass(obj) or inspect.isroutine(obj))
            and getattr(obj, "__module__", None) == module.__name__
        ):
            names.append(name)
    return names


@functools.cache
def _defined_names(module: types.ModuleType) -> tuple[str, ...]:
    """Names a module's own source binds at top level (classes, functions, assignments).

    Args:
      module: the module.

    Returns:
      The names, in source order.
    """
    try:
        tree = ast.parse(inspect.getsource(module))
    except (OSError, TypeError):
        return ()
    names: dict[str, None] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names[node.name] = None
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                names.update((n.id, None) for n in ast.walk(target) if isinstance(n, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names[node.target.id] = None
    return tuple(names)


def _kind(obj: object) -> str:
    if inspect.isclass(obj):
        return "exception" if issubclass(obj, BaseException) else "class"
    if inspect.isroutine(obj) or hasattr(obj, "__wrapped__"):
        return "function"
    return "data"


def plan(modules: list[str]) -> dict[str, list[tuple[str, str, str]]]:
    """For each module, its public names as ``(name, kind, home)``.

    ``home`` is the module whose page documents the object: the module itself when it
    defines the name (or re-exports it from a private module and is the first listed module
    to do so), otherwise the listed public module that defines it.

    Args:
      modules: the listed public modules.

    Returns:
      A dict from module name to its entries.
    """
    imported = {name: importlib.import_module(name) for name in modules}
    defined = {name: _defined_names(mod) for name, mod in imported.items()}
    listed = set(modules)
    homes: dict[int, str] = {}  # id(object) -> home of objects from private modules

    def home_of(modname: str, name: str, obj: object) -> str:
        if name in defined[modname]:
            return modname
        origin = getattr(obj, "__module__", None) if _kind(obj) != "data" else None
        if origin in listed and getattr(obj, "__name__", None) == name:
            return origin
        for other in modules:  # data, or an alias: the listed module that binds it
            if name in defined[other] and getattr(imported[other], name, None) is obj:
                return other
        return homes.setdefault(id(obj), modname)  # from a private module: first exporter

    result = {}
    for modname, mod in imported.items():
        entries = []
        for name in _public_names(mod):
            obj = getattr(mod, name)
            entries.append((name, _kind(obj), home_of(modname, name, obj)))
        result[modname] = entries
    return result


def _public_bases_if_private_ones(cls: type) -> list[str]:
    """The names of ``cls``'s public bases when it also has private learnopt ones, else [].

    Members a class inherits from a private base (``_common.FlaxModelTask``) have no other
    page, so the class documents them; ``:inherited-members:`` with the public bases' names
    leaves out what those bases document themselves.
    """
    bases = cls.__mro__[1:]
    private = [
        b
        for b in bases
        if b.__module__.startswith("learnopt")
        and (_is_private(b.__module__) or _is_private(b.__qualname__))
    ]
    if not private:
        return []
    return sorted({b.__name__ for b in bases if b not in private})


def _simple_value(obj: object) -> bool:
    return isinstance(obj, bool | int | float | str) and len(repr(obj)) <= 80


def render(modname: str, entries: list[tuple[str, str, str]]) -> str:
    """The reStructuredText of one module's page.

    Args:
      modname: the module.
      entries: its ``(name, kind, home)`` entries from :func:`plan`.

    Returns:
      The page's text.
    """
    module = importlib.import_module(modname)
    lines = [modname, "=" * len(modname), "", f".. automodule:: {modname}", ""]
    own = [(n, k) for n, k, h in entries if h == modname]
    links = [(n, k, h) for n, k, h in entries if h != modname]
    for name, kind in own:
        target = f"{modname}.{name}"
        if kind in ("class", "exception"):
            lines += [
                f".. auto{kind}:: {target}",
                "   :members:",
                "   :undoc-members:",
                "   :show-inheritance:",
            ]
            public_bases = _public_bases_if_private_ones(getattr(module, name))
            if public_bases:  # also the members inherited from private bases (no page)
                lines += [f"   :inherited-members: {', '.join(public_bases)}"]
            lines += [""]
        elif kind == "function":
            lines += [f".. autofunction:: {target}", ""]
        else:
            lines += [f".. autodata:: {target}"]
            if not _simple_value(getattr(module, name)):
                lines += ["   :no-value:"]
            lines += [""]
    if links:
        lines += [".. rubric:: Also importable from here", ""]
        for name, kind, home in links:
            role = {"class": "class", "exception": "exc", "function": "func"}.get(kind, "data")
            lines += [f"- :py:{role}:`{name} <{home}.{name}>` (documented in :py:mod:`{home}`)"]
        lines += [""]
    return "\n".join(lines)


def generate(app: Sphinx) -> None:
    """``builder-inited`` hook: write one page per listed module.

    Args:
      app: the Sphinx application.
    """
    api = pathlib.Path(app.srcdir) / API_DIR
    modules = [m for page in sorted(api.glob("*.md")) for m in listed_modules(page)]
    internal = set(listed_modules(api / INTERNALS))
    out = api / OUT_DIR
    out.mkdir(exist_ok=True)
    wanted = set()
    entries_by_module = plan(modules)
    for modname, entries in entries_by_module.items():
        path = out / f"{modname}.rst"
        wanted.add(path.name)
        text = render(modname, entries)
        if modname in internal:
            text = f":orphan:\n\n{text}"
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
    app._learnopt_api_plan = entries_by_module  # for resolve_reexports
    for stale in out.glob("*.rst"):
        if stale.name not in wanted:
            stale.unlink()
    logger.info("learnopt_api: %d module pages in %s", len(modules), out)


@functools.cache
def _import_path(dotted: str) -> object | None:
    """The object at a dotted path (a module, then attributes), or ``None``."""
    parts = dotted.split(".")
    for split in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:split]))
        except ImportError:
            continue
        try:
            for attr in parts[split:]:
                obj = getattr(obj, attr)
        except AttributeError:
            return None
        return obj
    return None


def _documented_name(app: Sphinx, dotted: str) -> str | None:
    """Where the object at ``dotted`` is documented: ``module.Name[.attr]`` or ``None``.

    ``dotted`` may name the object through a re-export (``learnopt.train.meta_train``),
    a private module (``learnopt._fields.setting``) or an inherited attribute
    (``learnopt.optimizers.adam.Adam.get_state``).
    """
    entries = getattr(app, "_learnopt_api_plan", {})
    parts = dotted.split(".")
    for split in range(len(parts) - 1, 0, -1):  # the longest module prefix
        modname = ".".join(parts[:split])
        if modname not in entries and not isinstance(_import_path(modname), types.ModuleType):
            continue
        rest = parts[split:]
        if modname in entries:
            home = {n: h for n, _, h in entries[modname]}.get(rest[0])
        else:  # an unlisted (private) module: find the listed module exporting the object
            obj = _import_path(".".join(parts[: split + 1]))
            home = None
            for listed, listed_entries in entries.items():
                for name, _, where in listed_entries:
                    if name == rest[0] and where == listed:
                        if getattr(importlib.import_module(listed), name, None) is obj:
                            home = listed
        if home is None:
            return None
        if len(rest) == 1:
            return f"{home}.{rest[0]}"
        owner = getattr(importlib.import_module(home), rest[0], None)
        if inspect.isclass(owner) and len(rest) == 2:
            for klass in owner.__mro__:  # an inherited attribute: the class that defines it
                if rest[1] in vars(klass):
                    base = _documented_name(app, f"{klass.__module__}.{klass.__qualname__}")
                    return f"{base}.{rest[1]}" if base else None
        return ".".join([home, *rest])
    return None


def resolve_reexports(
    app: Sphinx, env: BuildEnvironment, node: pending_xref, contnode: nodes.Element
) -> nodes.Element | None:
    """``missing-reference`` hook: resolve a Python reference that names a re-export.

    Tried in order: the name inside the current class, the current module and its parent
    packages, then as written. A reference into a private module whose object is not
    documented anywhere is shown as plain text (private names have no page).

    Args:
      app: the Sphinx application.
      env: the build environment.
      node: the unresolved reference.
      contnode: its content.

    Returns:
      The resolved reference, the plain content, or ``None`` (then Sphinx warns).
    """
    if node.get("refdomain") != "py":
        return None
    target = node["reftarget"].lstrip(".~")
    module = node.get("py:module") or ""
    klass = node.get("py:class")
    candidates = []
    if module and klass:
        candidates.append(f"{module}.{klass}.{target}")
    while module:
        candidates.append(f"{module}.{target}")
        module = module.rpartition(".")[0]
    candidates.append(target)
    objects = env.get_domain("py").objects
    for candidate in candidates:
        if not candidate.startswith("learnopt"):
            continue
        name = _documented_name(app, candidate)
        if name in objects:
            entry = objects[name]
            return make_refnode(
                app.builder, node["refdoc"], entry.docname, entry.node_id, contnode, name
            )
    if "." not in target:  # e.g. an autosummary line, read outside its module
        homes = {h for entries in app._learnopt_api_plan.values() for n, _, h in entries}
        objtypes = env.get_domain("py").objtypes_for_role(node["reftype"]) or []
        found = [
            f"{h}.{target}"
            for h in homes
            if f"{h}.{target}" in objects and objects[f"{h}.{target}"].objtype in objtypes
        ]
        if len(found) == 1:
            entry = objects[found[0]]
            return make_refnode(
                app.builder, node["refdoc"], entry.docname, entry.node_id, contnode, found[0]
            )
    if target.startswith("learnopt.") and _is_private(target):
        return contnode
    return None


_SECTION = re.compile(r"^(\s*)(Args|Arguments|Attributes|Keyword Args|Other Parameters):\s*$")
_CODE = re.compile(r"``.*?``|`.*?`")


def join_wrapped_names(
    app: Sphinx, what: str, name: str, obj: object, options: dict, lines: list[str]
) -> None:
    """``autodoc-process-docstring`` hook, run before napoleon's: one line per entry name list.

    learnopt documents several arguments at once (``a, b, c: as for X``) and wraps a long
    list of names onto indented lines; napoleon expects the names and their colon on one
    line. The wrapped lines of names are joined back onto the entry's first line.

    Args:
      app: the Sphinx application.
      what: the kind of object.
      name: its full name.
      obj: the object.
      options: the directive's options.
      lines: the docstring's lines, changed in place.
    """
    section_indent = None
    i = 0
    while i < len(lines):
        line = lines[i]
        header = _SECTION.match(line)
        if header:
            section_indent = len(header.group(1))
        elif line.strip() and section_indent is not None:
            indent = len(line) - len(line.lstrip())
            if indent <= section_indent:
                section_indent = None
            else:
                while (
                    line.rstrip().endswith(",")
                    and ":" not in _CODE.sub("", line)
                    and i + 1 < len(lines)
                    and len(lines[i + 1]) - len(lines[i + 1].lstrip()) > indent
                ):
                    line = f"{line.rstrip()} {lines.pop(i + 1).strip()}"
                lines[i] = line
        i += 1


_TYPE_LIKE = re.compile(r"[\w.]+(\[.*\])?( \| [\w.]+(\[.*\])?)*")


def keep_prose_first_line(
    app: Sphinx, what: str, name: str, obj: object, options: dict, lines: list[str]
) -> None:
    """``autodoc-process-docstring`` hook, run after napoleon's.

    Napoleon reads an attribute's or constant's first line ``X: text`` as "of type X" and
    moves ``X`` into a ``:type:`` field. In learnopt such a line is mostly prose ("Every
    registered task: ..."), so when ``X`` does not look like a type the line is put back.
    A constant without a docstring of its own (autodoc offers its type's, e.g. ``dict``'s)
    gets none.

    Args:
      app: the Sphinx application.
      what: the kind of object.
      name: its full name.
      obj: the object.
      options: the directive's options.
      lines: the docstring's lines, changed in place.
    """
    if what not in ("data", "attribute", "property") or not lines:
        return
    type_doc = inspect.getdoc(type(obj))
    if what == "data" and type_doc and "\n".join(lines).strip() == type_doc.strip():
        lines.clear()
        return
    if len(lines) >= 2 and lines[-2] == "" and lines[-1].startswith(":type: "):
        head = lines[-1].removeprefix(":type: ")
        if not _TYPE_LIKE.fullmatch(head.strip("`")):
            del lines[-2:]
            first = next((j for j, text in enumerate(lines) if text.strip()), None)
            if first is None:
                lines.append(f"{head}:")
            else:
                lines[first] = f"{head}: {lines[first]}"


def show_default_factories(
    app: Sphinx,
    what: str,
    name: str,
    obj: object,
    options: dict,
    signature: str | None,
    return_annotation: str | None,
) -> tuple[str | None, str | None] | None:
    """``autodoc-process-signature`` hook: a dataclass field's ``=<factory>`` as a call.

    ``inspect`` shows a ``default_factory`` as ``<factory>``, which is not Python, so
    Sphinx cannot parse the signature (and splits its annotations at every comma). The
    factory is shown called (``=dict()``), or as ``=...`` when it has no plain name.

    Args:
      app: the Sphinx application.
      what: the kind of object.
      name: its full name.
      obj: the object.
      options: the directive's options.
      signature: the signature text.
      return_annotation: the return annotation text.

    Returns:
      The new signature and return annotation, or ``None`` to keep them.
    """
    if not signature or "<factory>" not in signature:
        return None
    if dataclasses.is_dataclass(obj):
        for field in dataclasses.fields(obj):
            factory = field.default_factory
            if factory is not dataclasses.MISSING and "<" not in factory.__qualname__:
                signature = re.sub(
                    rf"(\b{field.name}: [^=]*?)\s*=\s*<factory>",
                    rf"\1 = {factory.__qualname__}()",
                    signature,
                )
    return signature.replace("<factory>", "..."), return_annotation


def setup(app: Sphinx) -> dict:
    """Registers :func:`generate`.

    Args:
      app: the Sphinx application.

    Returns:
      The extension's metadata.
    """
    app.connect("builder-inited", generate)
    app.connect("missing-reference", resolve_reexports)
    app.connect("autodoc-process-signature", show_default_factories)
    app.connect("autodoc-process-docstring", join_wrapped_names, priority=400)
    app.connect("autodoc-process-docstring", keep_prose_first_line, priority=600)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
