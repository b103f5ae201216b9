"""The notes' library's own tests, run against learnopt with only the import prefix changed.

Copies the test files of the modules learnopt ports (:data:`TEST_FILES`) from a checkout of
``google/learned_optimization``, rewrites ``learned_optimization`` -> ``learnopt`` and
nothing else, runs them with pytest (they are ``absltest`` tests, which pytest collects)
and prints the pass / fail / skip counts, then each test that did not pass.

The set is learnopt's definition: every test file of the library's ``optimizers/``,
``learned_optimizers/``, ``outer_trainers/``, the ported ``tasks`` modules, ``tree_utils``,
``summary`` and ``hyper_v2``. The library's pmap tests want exactly 8 local devices: on a
CPU the tests run with XLA's host platform split into 8 devices
(``--xla_force_host_platform_device_count=8``, unless ``XLA_FLAGS`` already sets a count);
a test the library skips anyway is counted as skipped, not failed.

    python benchmarks/run_library_tests.py --src /tmp/libsrc        # a checked-out tree
    python benchmarks/run_library_tests.py --git-dir /path/repo.git # archives its HEAD
    python benchmarks/run_library_tests.py --src ... --files image_mlp hyper_v2  # a subset

The library is not a dependency and is never imported: only its test files are read.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

#: The library's test files (paths under ``learned_optimization/``) that learnopt runs.
TEST_FILES = (
    "optimizers/base_test.py",
    "optimizers/gradient_accumulator_test.py",
    "optimizers/nadamw_test.py",
    "optimizers/opt_list_test.py",
    "optimizers/opt_to_optax_test.py",
    "optimizers/optax_opts_test.py",
    "optimizers/shampoo_test.py",
    "learned_optimizers/adafac_mlp_lopt_test.py",
    "learned_optimizers/adafac_nominal_test.py",
    "learned_optimizers/base_test.py",
    "learned_optimizers/mlp_lopt_test.py",
    "learned_optimizers/nn_adam_test.py",
    "learned_optimizers/rnn_mlp_lopt_test.py",
    "outer_trainers/full_es_test.py",
    "outer_trainers/full_grad_test.py",
    "outer_trainers/gradient_learner_test.py",
    "outer_trainers/lopt_truncated_step_test.py",
    "outer_trainers/truncated_es_test.py",
    "outer_trainers/truncated_grad_test.py",
    "outer_trainers/truncated_pes_pmap_test.py",
    "outer_trainers/truncated_pes_test.py",
    "outer_trainers/truncation_schedule_test.py",
    "tasks/quadratics_test.py",
    "tasks/task_augmentation_test.py",
    "tasks/fixed/image_mlp_test.py",
    "tasks/parametric/cfgobject_test.py",
    "tasks/parametric/parametric_utils_test.py",
    "tree_utils_test.py",
    "summary_test.py",
    "research/general_lopt/hyper_v2_test.py",
)


def _select(patterns: list[str] | None) -> tuple[str, ...]:
    """The entries of :data:`TEST_FILES` containing one of ``patterns`` (all if None)."""
    if not patterns:
        return TEST_FILES
    chosen = tuple(f for f in TEST_FILES if any(p in f for p in patterns))
    if not chosen:
        raise SystemExit(f"--files {' '.join(patterns)}: matches none of {TEST_FILES}")
    return chosen


def _archive(git_dir: str, dest: Path, files: tuple[str, ...] = TEST_FILES) -> Path:
    """Extracts ``files`` of ``git_dir``'s HEAD into ``dest``; returns the tree root."""
    for rel in files:
        path = f"learned_optimization/{rel}"
        out = subprocess.run(
            ["git", f"--git-dir={git_dir}", "show", f"HEAD:{path}"],
            capture_output=True,
            check=False,
        )
        if out.returncode != 0:
            raise SystemExit(f"--git-dir {git_dir}: cannot read {path}: {out.stderr.decode()}")
        (dest / path).parent.mkdir(parents=True, exist_ok=True)
        (dest / path).write_bytes(out.stdout)
    return dest


def _copy_with_prefix(
    src_root: Path, dest: Path, files: tuple[str, ...] = TEST_FILES
) -> list[Path]:
    """Copies ``files`` flat into ``dest`` with the import prefix changed."""
    copied = []
    for rel in files:
        src = src_root / "learned_optimization" / rel
        if not src.is_file():
            raise SystemExit(f"--src {src_root}: missing {src} (a learned_optimization checkout?)")
        text = src.read_text().replace("learned_optimization", "learnopt")
        target = dest / ("lib_" + rel.replace("/", "__"))
        target.write_text(text)
        copied.append(target)
    return copied


def _counts(
    junit: Path,
) -> tuple[dict[str, int], list[tuple[str, str, str]], dict[str, dict[str, int]]]:
    """``({passed, failed, skipped, total}, [(outcome, test id, first message line)],
    {test file: {passed, failed, skipped}})``."""
    counts = {"passed": 0, "failed": 0, "skipped": 0}
    per_file: dict[str, dict[str, int]] = {}
    bad = []
    for case in ET.parse(junit).getroot().iter("testcase"):
        name = f"{case.get('classname')}.{case.get('name')}"
        # A collection error has no class: its name is the module's.
        module = (case.get("classname") or case.get("name") or "").lstrip(".").split(".")[0]
        rel = module.removeprefix("lib_").replace("__", "/") + ".py"
        outcome = "passed"
        for tag in ("failure", "error", "skipped"):
            node = case.find(tag)
            if node is not None:
                outcome = "skipped" if tag == "skipped" else "failed"
                message = (node.get("message") or "").strip().splitlines()
                bad.append((tag, name, message[0][:200] if message else ""))
                break
        counts[outcome] += 1
        per_file.setdefault(rel, {"passed": 0, "failed": 0, "skipped": 0})[outcome] += 1
    counts["total"] = sum(counts.values())
    return counts, bad, per_file


def main(argv: list[str] | None = None) -> int:
    """Runs the library's tests against learnopt and prints the counts.

    Args:
      argv: command-line arguments (default ``sys.argv[1:]``).

    Returns:
      0 if every test that ran passed, else 1.
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--src", help="a checkout of google/learned_optimization")
    where.add_argument("--git-dir", help="a git directory of it (HEAD is read)")
    parser.add_argument(
        "--deps",
        default=None,
        help="a folder put on PYTHONPATH after learnopt: the library's test-only imports "
        "(absl-py, dm-haiku, gin-config), e.g. from pip install --target DIR --no-deps "
        "dm-haiku jmp tabulate gin-config",
    )
    parser.add_argument(
        "--files",
        nargs="+",
        default=None,
        help="run only the test files whose path contains one of these substrings",
    )
    parser.add_argument("-k", default=None, help="passed to pytest -k")
    parser.add_argument("--keep", action="store_true", help="keep the temporary test folder")
    args = parser.parse_args(argv)

    selected = _select(args.files)
    work = Path(tempfile.mkdtemp(prefix="learnopt-libtests-"))
    try:
        if args.git_dir:
            src_root = _archive(args.git_dir, work / "src", selected)
        else:
            src_root = Path(args.src)
        tests = work / "tests"
        tests.mkdir()
        files = _copy_with_prefix(src_root, tests, selected)
        junit = work / "junit.xml"
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
        cmd += ["--junitxml", str(junit), "-o", "junit_family=xunit1"]
        cmd += ["--continue-on-collection-errors"]
        if args.k:
            cmd += ["-k", args.k]
        cmd += [str(f) for f in files]
        t0 = time.perf_counter()
        env = dict(os.environ)
        if "xla_force_host_platform_device_count" not in env.get("XLA_FLAGS", ""):
            flags = f"{env.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count=8"
            env["XLA_FLAGS"] = flags.strip()
        if args.deps:
            env["PYTHONPATH"] = os.pathsep.join(
                p for p in (env.get("PYTHONPATH"), os.path.abspath(args.deps)) if p
            )
        subprocess.run(cmd, cwd=tests, env=env, check=False)
        seconds = time.perf_counter() - t0
        counts, bad, per_file = _counts(junit)
        runnable = counts["total"] - counts["skipped"]
        print(f"\nlibrary tests ({len(files)} files, prefix changed): {counts['total']} tests")
        print(
            f"passed {counts['passed']} of {runnable} runnable "
            f"({counts['skipped']} skipped, {counts['failed']} failed) in {seconds:.0f} s"
        )
        for rel, c in sorted(per_file.items()):
            print(f"  {rel}: {c['passed']} passed, {c['failed']} failed, {c['skipped']} skipped")
        for outcome, name, message in bad:
            print(f"  {outcome}: {name}: {message}")
        return 0 if counts["failed"] == 0 else 1
    finally:
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
