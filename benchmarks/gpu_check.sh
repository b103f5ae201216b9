#!/usr/bin/env bash
# The GPU check: learnopt's guarantees and figures on an NVIDIA GPU, in one command, written
# to benchmarks/results/gpu_check_<date>.md (+ .csv and one CSV per step).
#
#   benchmarks/gpu_check.sh [--dry-run] [--rehearse] [--kit DIR] [--no-install]
#                           [--venv DIR] [--python PY]
#
# On a machine without package registries (the lent H200: JAX for CUDA 13, flax, optax,
# orbax there; tensorflow-datasets, array_record, mlxtend and their needs not), run
#   benchmarks/gpu_check.sh --kit .whl
# with the kit's wheels in .whl (benchmarks/gpu_kit.sh fetches them; see docs/benchmarks.md):
# they go into a temporary --target folder, learnopt comes from this checkout, and the
# machine's own JAX runs. About 9 minutes on one H200 (GPU_CHECK_BUDGET, default 520 s,
# caps all steps together). Without --kit and --no-install it makes a venv and runs
# pip install -e '.[cuda,test]' (a machine with a registry).
#
# --rehearse runs the same steps on the CPU backend (JAX_PLATFORMS=cpu), shortened, with no
# GPU and no nvidia-smi: the suite runs it so the check cannot rot; its report says it is a
# rehearsal. --dry-run prints every step's exact command and exits 0, running nothing.
# Without a GPU (nvidia-smi missing or failing) the check says so and exits 3: it never
# silently measures the CPU. Exit status: 0 all steps passed; 3 no GPU; 4 JAX sees no GPU
# (or, rehearsing, not the CPU); 124 a step skipped for the budget; else the first failing
# step's status (the report is written either way once JAX has seen the device).
#
# Environment: LEARNOPT_NVIDIA_SMI overrides the nvidia-smi command (tests use it);
# GPU_CHECK_BUDGET (default 520; rehearsal 600) caps the seconds of all steps together: a
# step gets at most what is left, and a step with under 20 s left is skipped (marked so);
# GPU_CHECK_RESULTS (default benchmarks/results) is where the report goes;
# GPU_CHECK_WORKERS (default 8) the processes of the guarantees step.
set -euo pipefail

usage() {
  cat <<'EOF'
usage: benchmarks/gpu_check.sh [--dry-run] [--rehearse] [--kit DIR] [--no-install]
                               [--venv DIR] [--python PY] [--help]

Checks learnopt on an NVIDIA GPU and writes benchmarks/results/gpu_check_<date>.md (+ .csv):
  kit-install     (--kit) the kit's wheels into a temporary folder on PYTHONPATH
  jax-devices     JAX sees the GPU
  data            the embedded datasets prepared once (digits8, mnist5k)
  guarantees      compile-once and dtypes (f32, bf16, bf16 params with f32 grads) of every
                  optimizer and learned optimizer, outer steps traced once, the CPU-only
                  fused kernel absent from GPU programs (gpu_guarantees.py)
  throughput      the best recipe's PES and FullES outer steps/s, the population grown
                  until the GPU is busy (gpu_figures.py --recipe)
  meta-train      that recipe meta-trained ~45 s with the largest cheap population, then
                  scored on meta-valid (1 seed) beside the CPU's figure (gpu_metatrain.py)
  lopt-roofline   every learned optimizer's update vs optax.adam on a 100M-parameter MLP,
                  with the measured copy bandwidth and matmul rate as roofline, each in
                  its own process stopped after 20 s (bench_lopt_cost.py --isolate; the
                  blocked per-element form timed beside auto's)

options:
  --dry-run      print every step's exact command and exit 0; installs and runs nothing
  --rehearse     the same steps on the CPU backend, shortened (no GPU needed)
  --kit DIR      install DIR/*.whl with pip --target into a temporary folder and use
                 --python as it is (implies --no-install); protobuf from the kit only if
                 the machine's own cannot import tensorflow-datasets' protos
  --no-install   use --python (default python3) as it is, learnopt from this checkout
  --venv DIR     the virtual environment to create otherwise (default: .venv-gpu)
  --python PY    the interpreter (default python3)
  --help         this text

exit status: 0 every step passed; 3 no GPU; 4 JAX sees no GPU; 124 a step skipped for
the budget; else the status of the first failing step.
EOF
}

DRY_RUN=0
NO_INSTALL=0
REHEARSE=0
KIT=""
PYTHON_BIN=python3
VENV=""
while (($#)); do
  case "$1" in
    --dry-run) DRY_RUN=1 ;;
    --no-install) NO_INSTALL=1 ;;
    --rehearse) REHEARSE=1 ;;
    --kit)
      [[ $# -ge 2 ]] || { echo "gpu_check: --kit needs a directory of wheels" >&2; exit 2; }
      KIT="$2"
      NO_INSTALL=1
      shift
      ;;
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
if [[ -n $KIT ]]; then
  KIT="$(cd "$KIT" 2>/dev/null && pwd)" || { echo "gpu_check: --kit: no directory '$KIT'" >&2; exit 2; }
  compgen -G "$KIT/*.whl" >/dev/null || { echo "gpu_check: --kit: no wheels in $KIT" >&2; exit 2; }
fi
VENV="${VENV:-.venv-gpu}"
DATE="$(date -u +%Y-%m-%d)"
RESULTS="${GPU_CHECK_RESULTS:-benchmarks/results}"
if ((REHEARSE)); then
  REPORT="$RESULTS/gpu_check_rehearsal_$DATE"
  BUDGET="${GPU_CHECK_BUDGET:-600}"
else
  REPORT="$RESULTS/gpu_check_$DATE"
  BUDGET="${GPU_CHECK_BUDGET:-520}"
fi
NVIDIA_SMI="${LEARNOPT_NVIDIA_SMI:-nvidia-smi}"
WORKERS="${GPU_CHECK_WORKERS:-8}"
RECIPE=scheduledadam-cosine-hparams-wide-shared
if ((NO_INSTALL)); then
  PY="$PYTHON_BIN"
else
  PY="$VENV/bin/python"
fi
WORK="$(mktemp -d)"
SITE="$WORK/site"
if ((DRY_RUN)); then
  rmdir "$WORK"
  WORK='$WORK'
  SITE='$WORK/site'
fi

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
fi
if [[ -n $KIT ]]; then
  # The machine's protobuf is kept unless tensorflow-datasets' protos need a newer one.
  PROTOS="import tensorflow_datasets, tensorflow_metadata.proto.v0.schema_pb2, array_record, mlxtend"
  PIP_TARGET="$PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target $SITE"
  add_step kit-install 120 "ls $KIT/*.whl | grep -v /protobuf- | xargs $PIP_TARGET && { $PY -c '$PROTOS' 2>/dev/null || { echo 'the kit brings protobuf'; $PIP_TARGET $KIT/protobuf-*.whl && $PY -c '$PROTOS'; }; }"
fi
DATA_CMD="$PY -c 'from learnopt.tasks.datasets import storage; [print(storage.prepare_dataset(n)) for n in (\"digits8\", \"mnist5k\")]'"
if ((REHEARSE)); then
  DEVICE_CHECK="assert ds[0].platform == \"cpu\", \"rehearsal: JAX should be on the CPU: \" + str(ds)"
  add_step jax-devices 60 "$PY -c 'import jax; ds = jax.devices(); print(jax.__version__, ds); $DEVICE_CHECK'"
  add_step data 120 "$DATA_CMD"
  add_step guarantees 300 "$PY benchmarks/gpu_guarantees.py --out ${REPORT}_guarantees --workers 2 --only Adam lopt:MLPLOpt --cases f32 bf16/f32 --meta-steps walkthrough-bf16"
  add_step throughput 200 "$PY benchmarks/gpu_figures.py --recipe $RECIPE --only pes --population 2 --steps 1 --timeout 120 --out ${REPORT}_throughput"
  add_step meta-train 200 "$PY benchmarks/gpu_metatrain.py --recipe $RECIPE --out ${REPORT}_metatrain --work $WORK/metatrain_run --throughput ${REPORT}_throughput.csv --num-tasks 2 --steps 2 --eval-steps 5 --eval-tasks ImageMLP_Digits8_Relu32 --max-seconds 150"
  add_step lopt-roofline 150 "$PY benchmarks/bench_lopt_cost.py --sizes 64 32 10 --lopts LearnableAdam AdafacMLPLOpt --forms blocked --trials 1 --steps 2 --min-seconds 0.01 --isolate 60 --csv ${REPORT}_roofline.csv"
else
  add_step jax-devices 60 "$PY -c 'import jax; ds = jax.devices(); print(jax.__version__, ds); assert ds[0].platform == \"gpu\", \"JAX sees no GPU: \" + str(ds)'"
  add_step data 60 "$DATA_CMD"
  add_step guarantees 100 "$PY benchmarks/gpu_guarantees.py --out ${REPORT}_guarantees --workers $WORKERS"
  add_step throughput 130 "$PY benchmarks/gpu_figures.py --recipe $RECIPE --only pes full_es --population 16 128 2048 --steps 10 --total-length 50 --timeout 40 --out ${REPORT}_throughput"
  add_step meta-train 190 "$PY benchmarks/gpu_metatrain.py --recipe $RECIPE --out ${REPORT}_metatrain --work $WORK/metatrain_run --throughput ${REPORT}_throughput.csv --seconds 45 --max-seconds 170"
  add_step lopt-roofline 150 "$PY benchmarks/bench_lopt_cost.py --sizes 4096 4096 4096 4096 4096 4096 4096 --lopts LearnableAdam ScheduledAdam NNAdam Celo2 AdafacMLPLOpt MLPNomLOpt HyperV2 Celo MLPLOpt RNNMLPLOpt --forms blocked --trials 2 --steps 10 --min-seconds 0.1 --isolate 20 --csv ${REPORT}_roofline.csv"
fi
REPORT_CMD="$PY benchmarks/gpu_report.py --report $REPORT --logs $WORK --steps $WORK/steps.csv"

if ((DRY_RUN)); then
  echo "gpu_check --dry-run: steps it would run in $ROOT (nothing is installed or run)"
  echo "  budget: $BUDGET s for all steps together (each step: its timeout or what is left)"
  if ((REHEARSE)); then
    echo "  rehearsal: JAX_PLATFORMS=cpu, no nvidia-smi"
  else
    echo "  gpu: $NVIDIA_SMI -L (exit 3 if it is missing or fails)"
  fi
  [[ -n $KIT ]] && echo "  PYTHONPATH=$SITE:$ROOT"
  for i in "${!STEP_NAMES[@]}"; do
    printf '  %d. %s (timeout %ss): %s\n' "$((i + 1))" "${STEP_NAMES[$i]}" \
      "${STEP_LIMITS[$i]}" "${STEP_CMDS[$i]}"
  done
  echo "  report: $REPORT_CMD (writes $REPORT.md and $REPORT.csv)"
  exit 0
fi
trap 'rm -rf "$WORK"' EXIT

if ((REHEARSE)); then
  export JAX_PLATFORMS=cpu
  GPUS="rehearsal on the CPU backend (JAX_PLATFORMS=cpu): no GPU figures"
elif ! command -v "$NVIDIA_SMI" >/dev/null 2>&1 || ! GPUS="$("$NVIDIA_SMI" -L 2>&1)" \
  || ! grep -q "GPU" <<<"$GPUS"; then
  echo "gpu_check: no NVIDIA GPU found ('$NVIDIA_SMI -L' is missing or fails); not running on CPU (see --help; --rehearse runs the steps on the CPU, --dry-run shows them)" >&2
  exit 3
else
  "$NVIDIA_SMI" --query-gpu=name,memory.total,driver_version --format=csv >"$WORK/machine.txt" 2>&1 || true
  # One process at a time holds the GPU (the guarantees' workers allocate on demand).
  export XLA_PYTHON_CLIENT_MEM_FRACTION="${XLA_PYTHON_CLIENT_MEM_FRACTION:-0.92}"
fi
echo "$GPUS" >>"$WORK/machine.txt"

SECONDS=0  # the budget counts from here
if ((NO_INSTALL)); then
  export PYTHONPATH="$SITE:$ROOT${PYTHONPATH:+:$PYTHONPATH}"
fi
export LEARNOPT_DATA_DIR="${LEARNOPT_DATA_DIR:-$WORK/tfds}"  # datasets are prepared here
export LEARNOPT_CACHE_DIR="${LEARNOPT_CACHE_DIR:-$WORK/cache}"  # baselines, kernel builds
export PYTHONUNBUFFERED=1
mkdir -p "$RESULTS"
echo "step,status,seconds" >"$WORK/steps.csv"

STATUS=0
for i in "${!STEP_NAMES[@]}"; do
  name="${STEP_NAMES[$i]}"
  left=$((BUDGET - SECONDS))
  limit=$((left < STEP_LIMITS[i] ? left : STEP_LIMITS[i]))
  if ((limit < 20)); then
    echo "== gpu_check step $((i + 1))/${#STEP_NAMES[@]}: $name skipped: ${left} s of the ${BUDGET} s budget left"
    echo "$name,skipped (budget),0" >>"$WORK/steps.csv"
    ((STATUS == 0)) && STATUS=124
    continue
  fi
  echo "== gpu_check step $((i + 1))/${#STEP_NAMES[@]}: $name (timeout $limit s, $SECONDS s spent)"
  echo "   \$ ${STEP_CMDS[$i]}"
  start=$SECONDS
  set +e
  timeout --kill-after=10 "$limit" bash -c "${STEP_CMDS[$i]}" 2>&1 | tee "$WORK/$name.log"
  rc=${PIPESTATUS[0]}
  set -e
  echo "$name,$rc,$((SECONDS - start))" >>"$WORK/steps.csv"
  echo "   -> status $rc after $((SECONDS - start)) s"
  if ((rc != 0)); then
    ((STATUS == 0)) && STATUS=$rc
    if [[ $name == venv || $name == pip-install || $name == kit-install ]]; then
      echo "gpu_check: step $name failed; nothing further can run" >&2
      exit "$rc"
    fi
    if [[ $name == jax-devices ]]; then
      echo "gpu_check: JAX does not see the expected device (is JAX's CUDA build installed and the driver recent enough?)" >&2
      exit 4
    fi
  fi
done

cp "$WORK/machine.txt" "$WORK/machine.log"
set +e
$REPORT_CMD --rehearsal "$REHEARSE"
rc=$?
set -e
((rc != 0 && STATUS == 0)) && STATUS=$rc
echo "gpu_check: report written to $REPORT.md (figures: $REPORT.csv and ${REPORT}_*.csv); status $STATUS"
exit "$STATUS"
