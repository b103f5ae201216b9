#!/bin/bash
# The two valid_confidence.py tables of this folder (a diagnostic; 2 seeds; about 15 minutes
# on the 2-core CPU). The theta files are copied under the labels the CSVs show.
cd "$(dirname "$0")/../../.."
PY=$PWD/.venv/bin/python
R=$PWD/benchmarks/results
HERE=$R/celoadam-es-from-release-broad_2026-12-07
T=$(mktemp -d)
cp $R/celoadam-es-from-release-both_2026-12-07/theta_start.msgpack $T/release_wd0.01.msgpack
cp $R/celoadam-es-from-release_2026-12-07/theta_chosen_step40.msgpack $T/recipe21_chosen.msgpack
cp $R/celoadam-weight-decay_2026-12-07/theta_chosen_step750.msgpack $T/recipe15_chosen.msgpack
cp $R/celoadam-b2-wd-hidden-output_2026-12-07/theta_start.msgpack $T/recipe20_start.msgpack
$PY $HERE/valid_confidence.py --seeds 0,1 wc0.0316 wc0.01 adam0.01 $T/release_wd0.01.msgpack \
  $T/recipe21_chosen.msgpack $T/recipe15_chosen.msgpack $T/recipe20_start.msgpack \
  wc0.1 wc0.00316 adam0.0316 adam0.00316 CeloAdam > $HERE/valid_confidence_relu.csv
$PY $HERE/valid_confidence.py --task ImageMLP_Mnist5k_10_Silu96x48 --seeds 0,1 wc0.0316 wc0.01 \
  wc0.00316 adam0.01 adam0.00316 CeloAdam $T/release_wd0.01.msgpack $T/recipe15_chosen.msgpack \
  $T/recipe20_start.msgpack > $HERE/valid_confidence_silu.csv
$PY $HERE/plot_valid_confidence.py $HERE/valid_confidence_relu.csv --out $HERE/valid_confidence_relu.png
$PY $HERE/plot_valid_confidence.py $HERE/valid_confidence_silu.csv --out $HERE/valid_confidence_silu.png \
  --task ImageMLP_Mnist5k_10_Silu96x48
