#!/usr/bin/env bash
# The GPU check: install learnopt with CUDA, run the test suite and the benchmarks on the
# GPU, and write the figures to benchmarks/results/gpu_check_<date>.md (+ .csv).
#
#   benchmarks/gpu_check.sh [--dry-run] [--venv DIR] [--no-install] [--python PY]
#
# Run it from anywhere on a machine with an NVIDIA GPU (about 10 minutes on one H200,
# most of it pip and the tests). Every step has its own time limit. --dry-run prints the
# exact commands of every step and exits 0 on any machine, installing and running
# nothing. Without a GPU (nvidia-smi missing or failing) it says so and exits 3: it never
# silently measures the CPU. Exit status: 0 all steps passed; 3 no GPU; 4 JAX sees no
# GPU; otherwise the failing step's status (the report is written either way once the
# GPU is confirmed by JAX, with each step's status).
#
# Environment: LEARNOPT_NVIDIA_SMI overrides the nvidia-smi command (tests use it);
# GPU_CHECK_PYTEST_WORKERS (default 8) sets pytest-xdist's workers; GPU_CHECK_BUDGET
# (default 720) caps the seconds of all steps together: a step gets at most what is
# left, and steps with under 20 s left are skipped (marked so in the report);
# GPU_CHECK_RESULTS (default benchmarks/results) is where the report goes.
set -euo pipefail

usage() {
  cat <<'EOF'
usage: benchmarks/gpu_check.sh [--dry-run] [--venv DIR] [--no-install] [--python PY] [--help]

Checks learnopt on an NVIDIA GPU and writes benchmarks/results/gpu_check_<date>.md (+ .csv):
  1. a fresh virtual environment (python3 -m venv DIR, default .venv-gpu)
  2. pip install -e '.[cuda,test]' into it (jax[cuda12] and the test tools)
  3. check that jax.devices() holds a GPU
  4. the device-independent test suite on the GPU (pytest)
  5. benchmarks/bench_estimators.py (ms per outer step, compile time)
  6. benchmarks/bench_eval.py (learning-rate sweep vs one run)
  7. benchmarks/gpu_figures.py (compile s, ms/step, peak device memory per estimator)
  8. benchmarks/bench_lopt_cost.py (the learned optimizers' roofline: ms/step vs
     optax.adam, FLOPs and bytes per parameter, the GPU's measured peaks)

options:
  --dry-run      print every step's exact command and exit 0; installs and runs nothing
  --venv DIR     the virtual environment to create (default: .venv-gpu in the repository)
  --no-install   skip steps 1-2: use --python (default python3) as it is, with learnopt
                 taken from this checkout (PYTHONPATH); for machines without network
                 access where JAX with CUDA and learnopt's dependencies are installed
  --python PY    the interpreter that creates the venv, or runs everything with
                 --no-install (default python3)
  --help         this text

exit status: 0 every step passed; 3 no GPU (nvidia-smi missing or failing); 4 JAX sees
no GPU; else the status of the first failing step.
EOF
}

DRY_RUN=0
NO_INSTALL=0
PYTHON_BIN=python3
VENV=""
while (($#)); do
  case "$1" in
    --dry-run) DRY_RUN=1 ;;
    --no-install) NO_INSTALL=1 ;;
    --venv)
      [[ $# -ge 2 ]] || { echo "gpu_check: --venv needs a directory" >&2; exit 2; }
      VENV="$2"
      shift
      ;;
    --python)
      [[ $# -ge 2 ]] || { echo "gpu_check: --python needs an interpreter" >&2; exit 2; }
      PYTHON_BIN="$2"
      shift
      ;;
    -h | --help) usage; exit 0 ;;
    *) echo "gpu_check: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
VENV="${VENV:-.venv-gpu}"
DATE="$(date -u +%Y-%m-%d)"
RESULTS="${GPU_CHECK_RESULTS:-benchmarks/results}"
REPORT="$RESULTS/gpu_check_$DATE"  # .md and .csv
NVIDIA_SMI="${LEARNOPT_NVIDIA_SMI:-nvidia-smi}"
WORKERS="${GPU_CHECK_PYTEST_WORKERS:-8}"
BUDGET="${GPU_CHECK_BUDGET:-720}"
if ((NO_INSTALL)); then
  PY="$PYTHON_BIN"
else
  PY="$VENV/bin/python"
fi

# Tests left out, each CPU-specific by construction (they would fail or test nothing new
# on a GPU machine):
#  - test_distributed.py: two local processes with forced host CPU devices and gloo
#    collectives (the multi-process path; its mesh is 2 x 2 CPU devices by design).
#  - test_sharding.py: forces two host CPU devices with XLA_FLAGS and asserts two devices;
#    with a GPU present JAX's default backend is the one GPU.
#  - test_faults.py, test_resume.py: their runs are subprocesses pinned to
#    JAX_PLATFORMS=cpu (signals, kills, resume); they test processes, not devices, and
#    would spend minutes on CPU.
#  - test_notebooks.py: reruns the tutorials and compares with outputs stored from a CPU
#    run (minutes; not a device check).
# Everything else runs on the GPU. JAX_DEFAULT_MATMUL_PRECISION=highest: the tests
# compare against float32 references, and JAX's GPU default runs float32 matmuls in
# TF32 (the benchmarks keep JAX's default). XLA_PYTHON_CLIENT_PREALLOCATE=false: the
# pytest workers share the GPU instead of each reserving 75% of its memory.
PYTEST_EXCLUDES=(
  --ignore=tests/test_distributed.py
  --ignore=tests/test_sharding.py
  --ignore=tests/test_faults.py
  --ignore=tests/test_resume.py
  --ignore=tests/test_notebooks.py
)

# Steps: name, time limit (s), command. The commands are run exactly as --dry-run shows.
STEP_NAMES=()
STEP_LIMITS=()
STEP_CMDS=()
add_step() {
  STEP_NAMES+=("$1")
  STEP_LIMITS+=("$2")
  STEP_CMDS+=("$3")
}
if ((!NO_INSTALL)); then
  add_step venv 60 "$PYTHON_BIN -m venv --clear $VENV"
  add_step pip-install 300 "$PY -m pip install -q --upgrade pip && $PY -m pip install -q -e '.[cuda,test]'"
else
  export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
fi
add_step jax-devices 60 "$PY -c 'import jax; ds = jax.devices(); print(jax.__version__, ds); assert ds[0].platform == \"gpu\", \"JAX sees no GPU: \" + str(ds)'"
add_step pytest 360 "XLA_PYTHON_CLIENT_PREALLOCATE=false JAX_DEFAULT_MATMUL_PRECISION=highest $PY -m pytest -q -n $WORKERS -p no:cacheprovider --durations=10 ${PYTEST_EXCLUDES[*]} tests"
add_step bench-estimators 240 "$PY benchmarks/bench_estimators.py --steps 100 --trials 2"
add_step bench-eval 150 "$PY benchmarks/bench_eval.py --steps 300 --lrs 7 --seeds 3 --trials 2"
add_step gpu-figures 240 "$PY benchmarks/gpu_figures.py --out $REPORT --steps 50 --population 256 4096"
add_step lopt-roofline 300 "$PY benchmarks/bench_lopt_cost.py --trials 3 --min-seconds 0.3 --csv ${REPORT}_roofline.csv"

if ((DRY_RUN)); then
  echo "gpu_check --dry-run: steps it would run in $ROOT (nothing is installed or run)"
  echo "  budget: $BUDGET s for all steps together (each step: its timeout or what is left)"
  echo "  gpu: $NVIDIA_SMI -L (exit 3 if it is missing or fails)"
  for i in "${!STEP_NAMES[@]}"; do
    printf '  %d. %s (timeout %ss): %s\n' "$((i + 1))" "${STEP_NAMES[$i]}" \
      "${STEP_LIMITS[$i]}" "${STEP_CMDS[$i]}"
  done
  echo "  report: $REPORT.md and $REPORT.csv (bench_estimators' table: ${REPORT}_estimators.csv)"
  exit 0
fi

if ! command -v "$NVIDIA_SMI" >/dev/null 2>&1 || ! GPUS="$("$NVIDIA_SMI" -L 2>&1)" \
  || ! grep -q "GPU" <<<"$GPUS"; then
  echo "gpu_check: no NVIDIA GPU found ('$NVIDIA_SMI -L' is missing or fails); not running on CPU (see --help; --dry-run shows the steps)" >&2
  exit 3
fi

SECONDS=0  # the budget counts from here
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
export LEARNOPT_DATA_DIR="${LEARNOPT_DATA_DIR:-$WORK/tfds}"  # digits are prepared here
export PYTHONUNBUFFERED=1
mkdir -p "$RESULTS"
# bench_estimators.py writes benchmarks/results/estimators.csv (the CPU figures of
# docs/benchmarks.md): keep that file, and move the GPU table beside the report.
BENCH_CSV="benchmarks/results/estimators.csv"
SAVED_CSV="$WORK/estimators.csv"
[[ -f $BENCH_CSV ]] && cp -p "$BENCH_CSV" "$SAVED_CSV"

STATUS=0
declare -A STEP_STATUS STEP_SECONDS
for i in "${!STEP_NAMES[@]}"; do
  name="${STEP_NAMES[$i]}"
  left=$((BUDGET - SECONDS))
  limit=$((left < STEP_LIMITS[i] ? left : STEP_LIMITS[i]))
  if ((limit < 20)); then
    echo "== gpu_check step $((i + 1))/${#STEP_NAMES[@]}: $name skipped: ${left} s of the ${BUDGET} s budget left"
    STEP_STATUS[$name]="skipped (budget)"
    ((STATUS == 0)) && STATUS=124
    continue
  fi
  echo "== gpu_check step $((i + 1))/${#STEP_NAMES[@]}: $name (timeout $limit s)"
  echo "   \$ ${STEP_CMDS[$i]}"
  start=$SECONDS
  set +e
  timeout --kill-after=10 "$limit" bash -c "${STEP_CMDS[$i]}" 2>&1 | tee "$WORK/$name.log"
  rc=${PIPESTATUS[0]}
  set -e
  STEP_STATUS[$name]=$rc
  STEP_SECONDS[$name]=$((SECONDS - start))
  echo "   -> status $rc after ${STEP_SECONDS[$name]} s"
  if ((rc != 0)); then
    ((STATUS == 0)) && STATUS=$rc
    if [[ $name == venv || $name == pip-install ]]; then
      echo "gpu_check: step $name failed; nothing further can run" >&2
      exit "$rc"
    fi
    if [[ $name == jax-devices ]]; then
      echo "gpu_check: JAX does not see the GPU (is jax[cuda12] installed and the driver recent enough?)" >&2
      exit 4
    fi
  fi
done

if [[ -f $BENCH_CSV ]] && ! cmp -s "$BENCH_CSV" "$SAVED_CSV"; then
  cp "$BENCH_CSV" "${REPORT}_estimators.csv"  # written by this run's bench_estimators
fi
if [[ -f $SAVED_CSV ]]; then
  cp -p "$SAVED_CSV" "$BENCH_CSV"
fi

# The report: machine, versions, each step's status and time, and the figures.
{
  echo "# GPU check, $DATE"
  echo
  echo "Written by \`benchmarks/gpu_check.sh\` (see docs/distributed.md). Machine:"
  echo
  echo '```'
  "$NVIDIA_SMI" --query-gpu=name,memory.total,driver_version --format=csv 2>&1 || true
  sed -n 1p "$WORK/jax-devices.log" 2>/dev/null || true
  echo '```'
  echo
  echo "| step | status | seconds |"
  echo "| --- | ---: | ---: |"
  for name in "${STEP_NAMES[@]}"; do
    echo "| $name | ${STEP_STATUS[$name]:-not run} | ${STEP_SECONDS[$name]:-} |"
  done
  echo
  echo "## Tests (pytest, excluding the CPU-specific files named in gpu_check.sh)"
  echo
  echo '```'
  grep -E "passed|failed|error" "$WORK/pytest.log" | tail -n 3 || true
  echo '```'
  echo
  echo "## Outer step time, learnopt vs hand-written (bench_estimators.py)"
  echo
  echo '```'
  grep -vE "it/s|s/it|^\s*$" "$WORK/bench-estimators.log" || true
  echo '```'
  echo
  echo "## Learning-rate sweep vs one run (bench_eval.py)"
  echo
  echo '```'
  cat "$WORK/bench-eval.log" || true
  echo '```'
  echo
  echo "## Per estimator: compile, step time, device memory (gpu_figures.py)"
  echo
  echo "Task ImageMLP_Digits8_Relu32, LearnableAdam, unroll 4. XLA MiB: the compiled"
  echo "step's arguments + outputs - aliased + temporaries; peak MiB: the allocator's"
  echo "high-water mark of that configuration's own process (memory_stats)."
  echo
  echo "| estimator | tasks | compile s | ms/step | XLA MiB | peak MiB |"
  echo "| --- | ---: | ---: | ---: | ---: | ---: |"
  if [[ -f "$REPORT.csv" ]]; then
    tail -n +2 "$REPORT.csv" | while IFS=, read -r est n _backend _device cs ms xla peak; do
      mib() { [[ -n $1 ]] && awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }' || echo "n/a"; }
      echo "| $est | $n | $cs | $ms | $(mib "$xla") | $(mib "$peak") |"
    done
  fi
  echo
  echo "## Learned-optimizer updates vs optax.adam, and their roofline (bench_lopt_cost.py)"
  echo
  grep -E "^(MLP |measured peaks|optax.adam|\|)" "$WORK/lopt-roofline.log" || true
} >"$REPORT.md"
echo "gpu_check: report written to $REPORT.md (figures: $REPORT.csv); status $STATUS"
exit "$STATUS"
