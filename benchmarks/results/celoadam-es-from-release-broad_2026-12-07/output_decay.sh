#!/bin/bash
# Weight decay on the output matrix only (stop 55's second lever for the ReLU MLP, whose
# validation loss follows the output matrix's norm), on meta-valid's two MLPs, 2 seeds:
# the released CeloAdam theta with CeloAdam(weight_decay=L, weight_decay_by_progress=True,
# weight_decay_roles=("output",)) for L = 0.1, 0.3, 1.0, beside the release and recipe 20's
# roles (hidden and output, 0.1). About 6 minutes on the 2-core CPU.
cd "$(dirname "$0")/../../.."
PY=$PWD/.venv/bin/python
HERE=$PWD/benchmarks/results/celoadam-es-from-release-broad_2026-12-07
T=$(mktemp -d)
$PY - "$T" <<'PYEOF'
import sys
from learnopt import pretrained
from learnopt.learned_optimizers import celo_adam, theta_files
released = pretrained.load("CeloAdam").theta
progress = dict(weight_decay_by_progress=True)
for name, decay, roles in [("out_wd0.1", 0.1, ("output",)), ("out_wd0.3", 0.3, ("output",)),
                           ("out_wd1.0", 1.0, ("output",)), ("hidout_wd0.1", 0.1, ("hidden", "output"))]:
    lopt = celo_adam.CeloAdam(weight_decay=decay, weight_decay_roles=roles, **progress)
    theta_files.save(f"{sys.argv[1]}/{name}.msgpack", lopt, lopt.extend_theta(released))
PYEOF
for TASK in ImageMLP_Mnist5k_10_Silu96x48 ImageMLP_Digits8_Elu16x16x16x16; do
  $PY $HERE/valid_confidence.py --task $TASK --seeds 0,1 CeloAdam $T/out_wd0.1.msgpack \
    $T/out_wd0.3.msgpack $T/out_wd1.0.msgpack $T/hidout_wd0.1.msgpack > $HERE/output_decay_$TASK.csv
done
