"""benchmarks/gpu_check.sh: its dry run, its refusal without a GPU, and its report.

No GPU is needed: the script's nvidia-smi is replaced through ``LEARNOPT_NVIDIA_SMI`` and
its Python through ``--no-install --python STUB`` (a shell script answering each step
like the real tools would), run on a copy of the script in a temporary folder so the
repository's files are never touched. ``gpu_figures.measure`` runs for real on CPU.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "gpu_check.sh"

# Answers each step of gpu_check.sh like the real command would (see the module docstring).
PYTHON_STUB = """#!/usr/bin/env bash
case "$*" in
  *"import jax"*) echo "0.10.2 [CudaDevice(id=0)]"; [[ -z ${STUB_CPU:-} ]] ;;
  *"-m pytest"*) echo "....."; echo "5 passed in 1.00s" ;;
  *bench_estimators.py*)
    echo "estimator  tasks  learnopt ms   hand ms  ratio"
    echo "pes            8        0.500     0.490   1.02"
    echo "estimator,num_tasks" > benchmarks/results/estimators.csv
    echo "pes,8" >> benchmarks/results/estimators.csv ;;
  *bench_eval.py*) echo "without compile: one run 0.100 s, sweep 0.200 s, ratio 2.00x" ;;
  *gpu_figures.py*)
    out=$(sed -E 's/.*--out ([^ ]+).*/\\1/' <<<"$*")
    head=estimator,num_tasks,backend,device,compile_s,ms_per_step,xla_bytes,peak_bytes
    echo "$head" > "$out.csv"
    echo "pes,4096,gpu,NVIDIA H200,2.5,1.25,1048576,3145728" >> "$out.csv" ;;
  *bench_lopt_cost.py*)
    echo "measured peaks: 50000.0 GFLOP/s (matmul), 4000.0 GB/s (read + write)"
    echo "| learned optimizer | ms/step | ratio to adam |"
    echo "| \\`MLPLOpt\\` | 0.9 | 3.0 |" ;;
  *) echo "stub python: unexpected $*" >&2; exit 9 ;;
esac
"""


def _executable(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.fixture()
def checkout(tmp_path):
    """A copy of the script in a fake checkout with the CPU figures it must preserve."""
    (tmp_path / "benchmarks" / "results").mkdir(parents=True)
    shutil.copy(SCRIPT, tmp_path / "benchmarks" / "gpu_check.sh")
    (tmp_path / "benchmarks" / "results" / "estimators.csv").write_text("cpu figures\n")
    return tmp_path


def _run(script: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(script), *args],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def _run_stubbed(checkout: Path, tmp_path: Path, smi: Path, **env: str):
    """The checkout's gpu_check.sh with a stub nvidia-smi and a stub python (no install)."""
    stub = _executable(tmp_path / "python", PYTHON_STUB)
    script = checkout / "benchmarks" / "gpu_check.sh"
    return _run(script, "--no-install", "--python", str(stub), LEARNOPT_NVIDIA_SMI=str(smi), **env)


def test_script_is_valid_bash():
    proc = subprocess.run(["bash", "-n", str(SCRIPT)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_dry_run_names_every_step_and_runs_nothing(checkout, tmp_path):
    script = checkout / "benchmarks" / "gpu_check.sh"
    proc = _run(script, "--dry-run", LEARNOPT_NVIDIA_SMI=str(tmp_path / "absent"))
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "-m venv --clear .venv-gpu" in out
    assert "pip install -q -e '.[cuda,test]'" in out
    assert "-m pytest" in out and "--ignore=tests/test_distributed.py" in out
    assert "benchmarks/bench_estimators.py" in out and "benchmarks/bench_eval.py" in out
    assert "benchmarks/bench_lopt_cost.py" in out and "_roofline.csv" in out
    assert "benchmarks/results/gpu_check_" in out and ".md" in out
    assert sorted(p.name for p in checkout.rglob("*")) == [  # nothing created
        "benchmarks",
        "estimators.csv",
        "gpu_check.sh",
        "results",
    ]


def test_help_describes_the_options():
    proc = _run(SCRIPT, "--help")
    assert proc.returncode == 0
    for flag in ("--dry-run", "--venv", "--no-install", "--python"):
        assert flag in proc.stdout


def test_without_a_gpu_it_refuses_to_run(checkout, tmp_path):
    failing = _executable(
        tmp_path / "nvidia-smi", "#!/bin/sh\necho 'NVIDIA-SMI has failed'\nexit 9\n"
    )
    for smi in (str(tmp_path / "missing-nvidia-smi"), str(failing)):
        proc = _run(checkout / "benchmarks" / "gpu_check.sh", LEARNOPT_NVIDIA_SMI=smi)
        assert proc.returncode == 3, (smi, proc.stdout, proc.stderr)
        assert "no NVIDIA GPU found" in proc.stderr and "not running on CPU" in proc.stderr
        assert not (checkout / ".venv-gpu").exists()  # nothing was installed


def test_unknown_argument_is_an_error():
    proc = _run(SCRIPT, "--bogus")
    assert proc.returncode == 2 and "--bogus" in proc.stderr


def test_jax_without_gpu_stops_the_check(checkout, tmp_path):
    smi = _executable(tmp_path / "smi", "#!/bin/sh\necho 'GPU 0: NVIDIA H200 (UUID: x)'\n")
    proc = _run_stubbed(checkout, tmp_path, smi, STUB_CPU="1")
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert "JAX does not see the GPU" in proc.stderr


def test_report_gathers_every_step_and_keeps_the_cpu_figures(checkout, tmp_path):
    smi = _executable(
        tmp_path / "smi",
        '#!/bin/sh\nif [ "$1" = -L ]; then echo "GPU 0: NVIDIA H200 (UUID: x)";'
        ' else echo "name, memory.total"; echo "NVIDIA H200, 143771 MiB"; fi\n',
    )
    proc = _run_stubbed(checkout, tmp_path, smi)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    results = checkout / "benchmarks" / "results"
    (report,) = results.glob("gpu_check_*.md")
    text = report.read_text()
    steps = ("jax-devices", "pytest", "bench-estimators", "bench-eval", "gpu-figures")
    for step in (*steps, "lopt-roofline"):
        assert f"| {step} | 0 |" in text, step
    assert "NVIDIA H200, 143771 MiB" in text and "5 passed" in text
    assert "pes            8        0.500" in text and "sweep 0.200 s" in text
    assert "| pes | 4096 | 2.5 | 1.25 | 1.0 | 3.0 |" in text
    assert "50000.0 GFLOP/s" in text and "| `MLPLOpt` | 0.9 | 3.0 |" in text
    assert (results / "estimators.csv").read_text() == "cpu figures\n"  # CPU table kept
    (gpu_table,) = results.glob("gpu_check_*_estimators.csv")
    assert gpu_table.read_text().startswith("estimator,num_tasks")


def test_gpu_figures_measures_a_configuration_on_any_backend(tmp_path, monkeypatch):
    monkeypatch.setenv("LEARNOPT_DATA_DIR", str(tmp_path / "tfds"))
    spec = importlib.util.spec_from_file_location(
        "gpu_figures", ROOT / "benchmarks" / "gpu_figures.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    row = module.measure("full_grad", 1, 2)
    assert set(row) == set(module.FIELDS)
    assert row["compile_s"] > 0 and row["ms_per_step"] > 0
    assert row["xla_bytes"] > 0  # memory_analysis works on every backend
    if row["backend"] == "cpu":
        assert row["peak_bytes"] is None  # CPUs keep no allocator statistics
