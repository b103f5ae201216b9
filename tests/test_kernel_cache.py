"""The fused kernel's cache and settings: a damaged cached library is rebuilt or refused
(never loaded: a truncated one ends the process with SIGBUS), a failed build leaves the
kernel off with one warning naming the file and why, ``LEARNOPT_FUSED_KERNEL`` takes the
usual on/off words, ``CXX`` may carry arguments, and the compile has a time limit.

Real builds (about 5 s each): the shared one of ``available()``, two concurrent rebuilds
of a truncated library and one with ``CXX="<g++> -O0"``. The loads of damaged files run
in child processes, so that a crash fails the test instead of ending pytest.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest

from learnopt.learned_optimizers.blocks import fused_kernel

#: The environment variables, as documented (not the module's constants).
SWITCH, CACHE, TIMEOUT = (
    "LEARNOPT_FUSED_KERNEL",
    "LEARNOPT_KERNEL_CACHE",
    "LEARNOPT_KERNEL_BUILD_TIMEOUT",
)
GXX = shutil.which("g++") or shutil.which("c++")

#: What a child process runs: the kernel's availability and the reason, on one line.
PROBE = (
    "from learnopt.learned_optimizers.blocks import fused_kernel as k\n"
    "ok = k.available()\n"
    "print('RESULT', ok, k.unavailable_reason())\n"
)


def _probe(cache: Path, **env: str) -> subprocess.Popen:
    """Starts :data:`PROBE` in a child process with the kernel cache at ``cache``."""
    full = {k: v for k, v in os.environ.items() if k not in ("CXX", SWITCH)}
    full.update(env, **{CACHE: str(cache)})
    return subprocess.Popen(
        [sys.executable, "-c", PROBE],
        env=full,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _finish(proc: subprocess.Popen) -> tuple[str, str]:
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, f"exit {proc.returncode}\n{out}\n{err}"
    return out, err


def _whole(lib: Path) -> bool:
    """Whether ``lib`` matches its checksum file."""
    with lib.open("rb") as f:
        return fused_kernel._mismatch(f, str(lib)) is None


def _script(path: Path, body: str) -> str:
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return str(path)


@pytest.fixture(scope="module")
def built() -> Path:
    """The library ``available()`` built (or found) in the session's kernel cache."""
    assert GXX is not None, "the kernel cache's tests need a C++ compiler (g++ or c++) on PATH"
    assert fused_kernel.available(), fused_kernel.unavailable_reason()
    lib = Path(fused_kernel._library_path(fused_kernel._find_compiler()))
    assert _whole(lib)
    return lib


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A first ``available()`` call in this process, with an empty kernel cache (returned).

    Only for cases that never register a kernel (the module's state is put back after).
    """
    monkeypatch.setattr(fused_kernel, "_state", {})
    monkeypatch.delenv("CXX", raising=False)
    monkeypatch.delenv(SWITCH, raising=False)
    monkeypatch.delenv(TIMEOUT, raising=False)
    cache = tmp_path / "kernels"
    monkeypatch.setenv(CACHE, str(cache))
    return cache


def test_a_truncated_library_is_rebuilt_by_concurrent_processes(built: Path, tmp_path: Path):
    """4 KiB of a real library (with its checksum file) used to end every later run with
    SIGBUS; now each of two processes started together rebuilds it and loads the kernel,
    and the cache ends whole."""
    lib = tmp_path / built.name
    lib.write_bytes(built.read_bytes()[:4096])
    shutil.copy(f"{built}.sha256", f"{lib}.sha256")
    procs = [_probe(tmp_path) for _ in range(2)]
    for proc in procs:
        out, err = _finish(proc)
        assert "RESULT True None" in out, out + err
        assert "compiling the fused CPU kernel" in err and "4096 bytes" in err, err
        assert "Warning" not in err, err
    assert lib.read_bytes() == built.read_bytes()
    assert _whole(lib)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".build-")]


def test_a_compiler_command_with_arguments_rebuilds_an_empty_library(built: Path, tmp_path: Path):
    """``CXX="<g++> -O0"`` is a command with an argument (not one program's name), and a
    0-byte library in its place is rebuilt instead of leaving the kernel off."""
    cxx = f"{GXX} -O0"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CXX", cxx)
        mp.setenv(CACHE, str(tmp_path))
        lib = Path(fused_kernel._library_path(fused_kernel._find_compiler()))
    assert lib.name != built.name  # the command is part of the cache key
    lib.write_bytes(b"")
    shutil.copy(f"{built}.sha256", f"{lib}.sha256")
    out, err = _finish(_probe(tmp_path, CXX=cxx))
    assert "RESULT True None" in out, out + err
    assert "0 bytes" in err and err.count("compiling") == 1, err
    assert _whole(lib)


def test_random_bytes_whose_rebuild_fails_leave_the_kernel_off_with_one_warning(
    fresh: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture
):
    monkeypatch.setenv("CXX", _script(tmp_path / "badcc", "echo boom >&2; exit 1"))
    lib = Path(fused_kernel._library_path(fused_kernel._find_compiler()))
    fresh.mkdir()
    lib.write_bytes(os.urandom(100_000))
    with pytest.warns(RuntimeWarning) as record:
        assert not fused_kernel.available()
        assert not fused_kernel.available()  # the answer is kept: no second warning
    assert len(record) == 1 and record[0].category is fused_kernel.FusedKernelWarning
    message = str(record[0].message)
    assert str(lib) in message and "exited with status 1: boom" in message, message
    assert "checksum file" in message, message  # why the cached copy was not used
    assert fused_kernel.unavailable_reason() in message
    assert capfd.readouterr().err.count("compiling the fused CPU kernel") == 1


def test_a_missing_checksum_file_means_a_rebuild(built: Path, tmp_path: Path):
    """A library without its checksum file (a cache from before checksums) is not loaded."""
    lib = tmp_path / built.name
    shutil.copy(built, lib)
    with pytest.raises(fused_kernel._CacheMiss, match="checksum file .* is missing"):
        fused_kernel._load(str(lib))
    Path(f"{lib}.sha256").write_text("not a checksum\n")
    with pytest.raises(fused_kernel._CacheMiss, match="malformed"):
        fused_kernel._load(str(lib))


@pytest.mark.parametrize("value", ["0", "false", "FALSE", " off ", "No", "no\n"])
def test_the_usual_false_words_turn_the_kernel_off(
    fresh: Path, monkeypatch: pytest.MonkeyPatch, value: str
):
    monkeypatch.setenv(SWITCH, value)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert not fused_kernel.available()
    assert (
        fused_kernel.unavailable_reason() == f"turned off by LEARNOPT_FUSED_KERNEL={value.strip()}"
    )
    assert not fresh.exists()  # nothing was built


@pytest.mark.parametrize("value", ["1", "true", "Yes", " ON ", ""])
def test_the_usual_true_words_and_an_empty_value_turn_it_on(
    fresh: Path, monkeypatch: pytest.MonkeyPatch, value: str
):
    """On: the kernel is looked for (here: a compiler that does not exist, so no build)."""
    monkeypatch.setenv(SWITCH, value)
    monkeypatch.setenv("CXX", "no-such-compiler-4fd1")
    with pytest.warns(RuntimeWarning, match="no-such-compiler-4fd1"):
        assert not fused_kernel.available()


@pytest.mark.parametrize("value", ["2", "disable", "offf"])
def test_any_other_switch_value_is_an_error_naming_the_choices(
    fresh: Path, monkeypatch: pytest.MonkeyPatch, value: str
):
    monkeypatch.setenv(SWITCH, value)
    with pytest.raises(ValueError, match=r"LEARNOPT_FUSED_KERNEL=.*1, true, yes, on.*0, false, no"):
        fused_kernel.available()


def test_a_missing_compiler_program_is_named(fresh: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("CXX", "no-such-compiler-4fd1 -O0")
    with pytest.warns(RuntimeWarning, match="'no-such-compiler-4fd1'"):
        assert not fused_kernel.available()
    assert "'no-such-compiler-4fd1'" in fused_kernel.unavailable_reason()


def test_a_compile_past_its_time_limit_is_stopped_with_a_warning(
    fresh: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture
):
    monkeypatch.setenv("CXX", _script(tmp_path / "slowcc", "sleep 10"))
    monkeypatch.setenv(TIMEOUT, "1")
    start = time.monotonic()
    with pytest.warns(RuntimeWarning, match="time limit of 1 s") as record:
        assert not fused_kernel.available()
    assert time.monotonic() - start < 8
    assert len(record) == 1 and TIMEOUT in str(record[0].message)
    assert capfd.readouterr().err.count("compiling the fused CPU kernel") == 1


@pytest.mark.parametrize("value", ["abc", "0", "-5", "inf"])
def test_a_bad_time_limit_is_an_error_naming_it(
    fresh: Path, monkeypatch: pytest.MonkeyPatch, value: str
):
    monkeypatch.setenv(TIMEOUT, value)
    with pytest.raises(ValueError, match=TIMEOUT):
        fused_kernel.available()
