"""The package's structure: layers as docs/design.md states them, no import cycles, every
module importable on its own, configurations free of JAX.

Imports are read from the source (``ast``), those inside functions included, so a lazy
import that runs upward or closes a circle is caught as well as a top-level one. A
package ``__init__`` that re-exports lazily names its modules in a module-level
``MODULES = ("learnopt.module", ...)`` tuple (:mod:`learnopt._lazy`), read here as
imports too.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "learnopt"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _resolve(name: str) -> str | None:
    """The learnopt module that ``name`` (a module or a name inside one) refers to."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imports(module: str) -> set[str]:
    """Every learnopt module that ``module`` imports, anywhere in its source."""
    path = MODULES[module]
    return _imports_in(path.read_text(), module, path.name == "__init__.py")


def _imports_in(source: str, module: str, is_package: bool) -> set[str]:
    tree = ast.parse(source)
    package = module if is_package else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            # ``from pkg import sub`` imports the submodule when there is one.
            targets = [f"{mod}.{a.name}" for a in node.names] or [mod]
        elif (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "MODULES" for t in node.targets)
            and isinstance(node.value, (ast.Tuple, ast.List))
        ):
            targets = [v.value for v in node.value.elts if isinstance(v, ast.Constant)]
        for target in targets:
            if target.startswith("learnopt"):
                resolved = _resolve(target)
                if resolved and resolved != module:
                    found.add(resolved)
    return found


def _layers() -> dict[str, int]:
    """docs/design.md's layer table: module prefix -> layer."""
    text = (ROOT / "docs" / "design.md").read_text()
    table: dict[str, int] = {}
    for line in text.splitlines():
        match = re.match(r"\|\s*(\d+)\s*\|([^|]*)\|", line)
        if match:
            for name in re.findall(r"`([\w.]+)`", match.group(2)):
                table[name] = int(match.group(1))
    return table


LAYERS = _layers()


def _layer(module: str) -> int | None:
    """The layer of the longest listed prefix (the root ``learnopt`` only for itself)."""
    name = module
    while name:
        if name in LAYERS and (name != "learnopt" or module == "learnopt"):
            return LAYERS[name]
        name = name.rpartition(".")[0]
    return None


GRAPH = {m: _imports(m) for m in MODULES}


def test_design_doc_lists_layers():
    assert LAYERS, "docs/design.md has no layer table"
    assert set(LAYERS.values()) == set(range(max(LAYERS.values()) + 1))


def test_every_module_has_a_layer():
    missing = sorted(m for m in MODULES if _layer(m) is None)
    assert not missing, f"modules without a layer in docs/design.md: {missing}"


def test_no_module_imports_upward():
    upward = []
    for module, targets in GRAPH.items():
        for target in targets:
            if _layer(target) > _layer(module):
                upward.append(f"{module} ({_layer(module)}) -> {target} ({_layer(target)})")
    assert not upward, "imports against docs/design.md's layers:\n" + "\n".join(sorted(upward))


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    sys.setrecursionlimit(max(10_000, sys.getrecursionlimit()))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycles():
    assert _cycles(GRAPH) == []


def test_cycle_finder_finds_a_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]


def test_every_module_imports_on_its_own():
    """Each module in a fresh interpreter (forked from one that imported only the
    third-party libraries, so that JAX is not imported 90 times)."""
    script = r"""
import importlib, os, sys, traceback, warnings
warnings.simplefilter("ignore")
import numpy, jax, jax.numpy, flax, flax.linen, flax.struct, optax  # third-party only
failures = []
for name in sys.argv[1:]:
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            importlib.import_module(name)
            code = 0
        except BaseException:
            os.write(w, traceback.format_exc().encode()[-4000:])
            code = 1
        os.close(w)
        os._exit(code)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        err = f.read().decode()
    _, status = os.waitpid(pid, 0)
    if status:
        failures.append(f"{name}:\n{err}")
print("\n".join(failures))
sys.exit(1 if failures else 0)
"""
    names = [m for m in MODULES if m != "learnopt.__main__"]
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    proc = subprocess.run(
        [sys.executable, "-c", script, *names],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-8000:] + proc.stderr[-2000:]


JAX_FREE = ("learnopt.run.config", "learnopt.evaluation.config", "learnopt.recipes")


def test_configurations_and_parser_do_not_import_jax():
    code = (
        "import sys\n"
        + "".join(f"import {m}\n" for m in JAX_FREE)
        + "import learnopt.cli\n"
        + "learnopt.cli.build_parser()\n"
        + "heavy = sorted(m for m in ('jax', 'flax', 'optax', 'numpy', 'tensorflow') "
        + "if m in sys.modules)\n"
        + "print(heavy)\n"
        + "sys.exit(1 if heavy else 0)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_import_finder_reads_function_level_relative_and_export_imports():
    source = (
        "import os\n"
        "from . import checkpoints\n"
        "MODULES = ('learnopt.recipes',)\n"
        "def f():\n"
        "    from learnopt.tasks import base\n"
        "    import learnopt.plots\n"
    )
    found = _imports_in(source, "learnopt.distributed", is_package=False)
    assert found == {
        "learnopt.checkpoints",
        "learnopt.recipes",
        "learnopt.tasks.base",
        "learnopt.plots",
    }


MAX_FILE_LINES = 600
MAX_FUNCTION_LINES = 80


def _long_functions(source: str) -> list[tuple[str, int]]:
    """``(name, lines)`` of the functions over MAX_FUNCTION_LINES whose docstring does not
    say why (a line beginning ``Long (over 80 lines)``)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            lines = node.end_lineno - node.lineno + 1
            doc = ast.get_docstring(node) or ""
            if lines > MAX_FUNCTION_LINES and "Long (over 80 lines)" not in doc:
                found.append((node.name, lines))
    return found


def test_files_and_functions_stay_small():
    """No module of the package is over 600 lines, and no function over 80 lines unless its
    docstring says why (design.md: a newcomer reads a file in one sitting)."""
    big, long = [], []
    for path in sorted(PACKAGE.rglob("*.py")):
        source = path.read_text()
        rel = path.relative_to(ROOT)
        if source.count("\n") > MAX_FILE_LINES:
            big.append(f"{rel}: {source.count(chr(10))} lines")
        long += [f"{rel}:{name} ({n} lines)" for name, n in _long_functions(source)]
    assert not big, "files over 600 lines:\n" + "\n".join(big)
    assert not long, "functions over 80 lines without a why:\n" + "\n".join(long)


def test_the_size_check_finds_a_long_function_without_a_why():
    body = "\n".join(f"    x{i} = {i}" for i in range(90))
    plain = f"def f():\n{body}\n"
    why = f'def f():\n    """Long (over 80 lines): a table."""\n{body}\n'
    assert _long_functions(plain) == [("f", 91)] and _long_functions(why) == []
