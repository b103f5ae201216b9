"""benchmarks/gpu_check.sh and its scripts: dry runs, refusals, the kit, the report, and a
real rehearsal of every step on the CPU backend.

Most tests need no GPU: the script's nvidia-smi is replaced through ``LEARNOPT_NVIDIA_SMI``
and its Python through ``--no-install --python STUB`` (a shell script answering each step
like the real tools would; the report step runs the real ``gpu_report.py``), on a copy of
the scripts in a temporary folder so the repository's files are never touched.
``test_rehearsal_runs_every_step_on_the_cpu`` runs the real check, shortened, with
``--rehearse`` (``JAX_PLATFORMS=cpu``): the check cannot rot between GPU sessions.
"""

from __future__ import annotations

import csv
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "gpu_check.sh"
SCRIPTS = ("gpu_check.sh", "gpu_report.py")

# Answers each step of gpu_check.sh like the real command would (see the module docstring).
PYTHON_STUB = """#!/usr/bin/env bash
out() { sed -E 's/.*--out ([^ ]+).*/\\1/' <<<"$*"; }
case "$*" in
  *"-m pip install"*)
    echo "$*" >> "$STUB_PIP_LOG" ;;
  *"import tensorflow_datasets"*)
    # An old machine protobuf: the probe fails until the kit's protobuf is installed.
    [[ -z ${STUB_OLD_PROTOBUF:-} ]] || grep -q protobuf- "$STUB_PIP_LOG" ;;
  *"import jax"*) echo "0.11.2 [CudaDevice(id=0)]"; [[ -z ${STUB_CPU:-} ]] ;;
  *prepare_dataset*) echo "prepared" ;;
  *gpu_guarantees.py*)
    o=$(out "$*")
    echo "kind,name,case,backend,ok,detail,seconds" > "$o.csv"
    echo "conformance,Adam,f32,gpu,True,traces 1/1,0.5" >> "$o.csv"
    ok=True; [[ -n ${STUB_FAIL:-} ]] && ok=False
    echo "fused-kernel,MLPLOpt,f32,gpu,$ok,kernel in the program: False,1.0" >> "$o.csv"
    [[ $ok == True ]] ;;
  *gpu_figures.py*)
    o=$(out "$*")
    h=recipe,estimator,num_tasks,backend,device,compile_s,ms_per_step,xla_bytes,peak_bytes
    echo "$h,steps_per_s,runs_per_s" > "$o.csv"
    echo "r,pes,16,gpu,NVIDIA H200,16.4,65.2,470000000,526000000,15.3,246.0" >> "$o.csv"
    echo "r,pes,256,gpu,NVIDIA H200,17.2,855.7,7196000000,7226000000,1.17,299.0" >> "$o.csv" ;;
  *gpu_metatrain.py*)
    o=$(out "$*")
    echo "recipe,num_tasks,steps,steps_done,seconds,steps_per_s,score_start,score_end" > "$o.csv"
    echo "r,16,700,700,150.0,4.7,7.27,0.95" >> "$o.csv" ;;
  *bench_lopt_cost.py*)
    echo "MLP 4096-4096: 16,777,216 parameters; NVIDIA H200"
    echo "measured peaks: 359580.7 GFLOP/s (matmul), 3870.9 GB/s (read + write)"
    echo "| learned optimizer | ms/step | ratio to adam |"
    echo "| \\`MLPLOpt\\` | 0.9 | 3.0 |" ;;
  *gpu_report.py*) exec "$STUB_REAL_PYTHON" "$@" ;;
  *) echo "stub python: unexpected $*" >&2; exit 9 ;;
esac
"""


def _executable(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.fixture()
def checkout(tmp_path):
    """The check's scripts in a fake checkout, with the CPU's throughput figures."""
    bench = tmp_path / "checkout" / "benchmarks"
    (bench / "results").mkdir(parents=True)
    for name in SCRIPTS:
        shutil.copy(ROOT / "benchmarks" / name, bench / name)
    (bench / "results" / "cpu_throughput.csv").write_text(
        "recipe,estimator,num_tasks,steps_per_s\nr,pes,16,1.7\n"
    )
    return tmp_path / "checkout"


def _run(script: Path, *args: str, timeout: float = 60, **env: str):
    return subprocess.run(
        ["bash", str(script), *args],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture()
def gpu_smi(tmp_path):
    return _executable(
        tmp_path / "smi",
        '#!/bin/sh\nif [ "$1" = -L ]; then echo "GPU 0: NVIDIA H200 (UUID: x)";'
        ' else echo "name, memory.total"; echo "NVIDIA H200, 143771 MiB"; fi\n',
    )


def _run_stubbed(checkout: Path, tmp_path: Path, smi: Path, *args: str, **env: str):
    """The checkout's gpu_check.sh with a stub nvidia-smi and a stub python."""
    stub = _executable(tmp_path / "python", PYTHON_STUB)
    return _run(
        checkout / "benchmarks" / "gpu_check.sh",
        *(args or ("--no-install",)),
        "--python",
        str(stub),
        LEARNOPT_NVIDIA_SMI=str(smi),
        STUB_REAL_PYTHON=sys.executable,
        STUB_PIP_LOG=str(tmp_path / "pip.log"),
        **env,
    )


def _kit(tmp_path: Path) -> Path:
    kit = tmp_path / "kit"
    kit.mkdir()
    for name in ("tensorflow_datasets-4.9.10-py3-none-any.whl", "protobuf-7.36.2-abi3.whl"):
        (kit / name).write_bytes(b"")
    return kit


def test_script_is_valid_bash():
    proc = subprocess.run(["bash", "-n", str(SCRIPT)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_dry_run_names_every_step_and_runs_nothing(checkout, tmp_path):
    script = checkout / "benchmarks" / "gpu_check.sh"
    before = sorted(p.name for p in checkout.rglob("*"))
    proc = _run(script, "--dry-run", LEARNOPT_NVIDIA_SMI=str(tmp_path / "absent"))
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "-m venv --clear .venv-gpu" in out
    assert "pip install -q -e '.[cuda,test]'" in out
    for step in ("jax-devices", "data", "guarantees", "throughput", "meta-train", "lopt-roofline"):
        assert f". {step} (timeout" in out, step
    assert "benchmarks/gpu_guarantees.py" in out and "benchmarks/gpu_metatrain.py" in out
    assert "--recipe scheduledadam-cosine-hparams-wide-shared" in out
    assert "bench_lopt_cost.py --sizes 4096 4096 4096 4096 4096 4096 4096" in out
    assert "--isolate" in out and "_roofline.csv" in out
    assert "benchmarks/results/gpu_check_" in out and "gpu_report.py" in out
    assert sorted(p.name for p in checkout.rglob("*")) == before  # nothing created


def test_dry_run_with_the_kit_installs_wheels_not_a_venv(checkout, tmp_path):
    kit = _kit(tmp_path)
    proc = _run(checkout / "benchmarks" / "gpu_check.sh", "--dry-run", "--kit", str(kit))
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "venv" not in out.replace(".venv-gpu", "") and "pip-install" not in out
    assert "kit-install" in out and f"ls {kit}/*.whl | grep -v /protobuf-" in out
    assert "--no-index --no-deps" in out and "--target $WORK/site" in out
    assert "PYTHONPATH=$WORK/site:" in out


def test_dry_run_of_the_rehearsal_is_shortened_and_on_the_cpu(checkout):
    proc = _run(checkout / "benchmarks" / "gpu_check.sh", "--dry-run", "--rehearse")
    assert proc.returncode == 0, proc.stderr
    assert "JAX_PLATFORMS=cpu" in proc.stdout and "gpu_check_rehearsal_" in proc.stdout
    assert "--sizes 4096" not in proc.stdout  # no 100M-parameter model on the CPU


@pytest.mark.parametrize("make_kit", ["missing", "empty"])
def test_a_kit_without_wheels_is_refused(tmp_path, make_kit):
    kit = tmp_path / "kit"
    if make_kit == "empty":
        kit.mkdir()
    proc = _run(SCRIPT, "--dry-run", "--kit", str(kit))
    assert proc.returncode == 2 and "--kit" in proc.stderr, proc.stderr


def test_help_describes_the_options():
    proc = _run(SCRIPT, "--help")
    assert proc.returncode == 0
    for flag in ("--dry-run", "--rehearse", "--kit", "--venv", "--no-install", "--python"):
        assert flag in proc.stdout


def test_without_a_gpu_it_refuses_to_run(checkout, tmp_path):
    failing = _executable(
        tmp_path / "nvidia-smi", "#!/bin/sh\necho 'NVIDIA-SMI has failed'\nexit 9\n"
    )
    for smi in (str(tmp_path / "missing-nvidia-smi"), str(failing)):
        proc = _run(checkout / "benchmarks" / "gpu_check.sh", LEARNOPT_NVIDIA_SMI=smi)
        assert proc.returncode == 3, (smi, proc.stdout, proc.stderr)
        assert "no NVIDIA GPU found" in proc.stderr and "not running on CPU" in proc.stderr
        assert "--rehearse" in proc.stderr
        assert not (checkout / ".venv-gpu").exists()  # nothing was installed


def test_unknown_argument_is_an_error():
    proc = _run(SCRIPT, "--bogus")
    assert proc.returncode == 2 and "--bogus" in proc.stderr


def test_jax_without_gpu_stops_the_check(checkout, tmp_path, gpu_smi):
    proc = _run_stubbed(checkout, tmp_path, gpu_smi, STUB_CPU="1")
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert "JAX does not see the expected device" in proc.stderr


def test_report_gathers_every_step_with_the_cpu_figures_beside(checkout, tmp_path, gpu_smi):
    proc = _run_stubbed(checkout, tmp_path, gpu_smi)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    results = checkout / "benchmarks" / "results"
    (report,) = results.glob("gpu_check_*[0-9].md")
    text = report.read_text()
    for step in ("jax-devices", "data", "guarantees", "throughput", "meta-train", "lopt-roofline"):
        assert f"| {step} | 0 |" in text, step
    assert "NVIDIA H200, 143771 MiB" in text and "0.11.2 [CudaDevice(id=0)]" in text
    assert "2 of 2 passed on `gpu`" in text
    assert "| pes | 16 | 16.4 | 65.2 | 15.3 | 246.0 | 448 | 502 | 1.7 |" in text
    assert "| pes | 256 |" in text and "256 tasks, runs 299.0" in text
    assert "| meta-valid score at the end | 0.95 |" in text
    assert "359580.7 GFLOP/s" in text and "| `MLPLOpt` | 0.9 | 3.0 |" in text
    with open(report.with_suffix(".csv"), newline="") as f:
        figures = list(csv.DictReader(f))
    assert {"section": "throughput", "name": "pes", "setting": "256 tasks", "value": "1.17",
            "unit": "outer steps/s"} in figures  # fmt: skip
    assert any(r["section"] == "meta-train" and r["setting"] == "score_end" for r in figures)


def test_a_failed_guarantee_fails_the_check_and_is_listed(checkout, tmp_path, gpu_smi):
    proc = _run_stubbed(checkout, tmp_path, gpu_smi, STUB_FAIL="1")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    (report,) = (checkout / "benchmarks" / "results").glob("gpu_check_*[0-9].md")
    text = report.read_text()
    assert "| guarantees | 1 |" in text and "1 of 2 passed" in text
    assert "| fused-kernel | MLPLOpt | f32 | False |" in text
    assert "| throughput | 0 |" in text  # the steps after it still ran


@pytest.mark.parametrize("old_protobuf", [False, True], ids=["machine-protobuf", "kit-protobuf"])
def test_kit_installs_protobuf_only_when_the_machine_needs_it(
    checkout, tmp_path, gpu_smi, old_protobuf
):
    kit = _kit(tmp_path)
    env = {"STUB_OLD_PROTOBUF": "1"} if old_protobuf else {}
    proc = _run_stubbed(checkout, tmp_path, gpu_smi, "--kit", str(kit), **env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    calls = (tmp_path / "pip.log").read_text().splitlines()
    assert "tensorflow_datasets-4.9.10" in calls[0] and "protobuf-" not in calls[0]
    assert "--target" in calls[0] and "--no-index" in calls[0]
    if old_protobuf:
        assert len(calls) == 2 and "protobuf-7.36.2" in calls[1]
        assert "the kit brings protobuf" in proc.stdout
    else:
        assert len(calls) == 1
    (report,) = (checkout / "benchmarks" / "results").glob("gpu_check_*[0-9].md")
    assert "| kit-install | 0 |" in report.read_text()


def test_rehearsal_runs_every_step_on_the_cpu(tmp_path):
    """The real check, shortened, on the CPU backend (about 2-3 minutes on 2 cores)."""
    results = tmp_path / "results"
    proc = _run(
        SCRIPT,
        "--rehearse",
        "--no-install",
        "--python",
        sys.executable,
        timeout=900,
        GPU_CHECK_RESULTS=str(results),
        LEARNOPT_DATA_DIR=str(tmp_path / "data"),
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    (report,) = results.glob("gpu_check_rehearsal_*[0-9].md")
    text = report.read_text()
    assert "rehearsal on the CPU backend" in text and "Not GPU figures" in text
    for step in ("jax-devices", "data", "guarantees", "throughput", "meta-train", "lopt-roofline"):
        assert f"| {step} | 0 |" in text, step
    assert "passed on `cpu`" in text and "(missing" not in text
    prefix = str(report)[: -len(".md")]
    throughput = list(csv.DictReader(open(prefix + "_throughput.csv")))
    assert [r["num_tasks"] for r in throughput] and float(throughput[0]["steps_per_s"]) > 0
    (meta,) = csv.DictReader(open(prefix + "_metatrain.csv"))
    assert meta["steps_done"] == "2" and float(meta["score_start"]) > 0
    assert float(meta["score_end"]) > 0
    roof = {r["learned optimizer"]: r for r in csv.DictReader(open(prefix + "_roofline.csv"))}
    assert set(roof) == {"LearnableAdam", "AdafacMLPLOpt"}
    assert "blocked=" in roof["AdafacMLPLOpt"]["form ms"]


def test_metatrain_takes_the_largest_population_at_half_the_smallest_ones_rate(
    tmp_path, repo_script
):
    choose = repo_script("benchmarks/gpu_metatrain.py").choose
    path = tmp_path / "t.csv"
    path.write_text(
        "estimator,num_tasks,steps_per_s\npes,16,20.0\npes,128,11.0\npes,2048,2.0\n"
        "full_es,4096,30.0\n"
    )
    assert choose(str(path), 60) == (128, int(0.8 * 60 * 11.0))
    assert choose(str(tmp_path / "absent.csv"), 60) == (256, 1000)  # no measurements


def test_gpu_figures_measures_a_configuration_on_any_backend(tmp_path, monkeypatch, repo_script):
    monkeypatch.setenv("LEARNOPT_DATA_DIR", str(tmp_path / "tfds"))
    module = repo_script("benchmarks/gpu_figures.py")
    row = module.measure("full_grad", 1, 2)
    assert set(row) == set(module.FIELDS)
    assert row["compile_s"] > 0 and row["ms_per_step"] > 0
    assert row["steps_per_s"] > 0 and row["runs_per_s"] == pytest.approx(row["steps_per_s"], 0.01)
    assert row["xla_bytes"] > 0  # memory_analysis works on every backend
    if row["backend"] == "cpu":
        assert row["peak_bytes"] is None  # CPUs keep no allocator statistics
