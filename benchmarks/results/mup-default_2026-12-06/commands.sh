#!/bin/bash
# Issue 32, the width-aware lever without meta-training: the shipped default
# (ScheduledAdam_cosine_hparams, meta-trained on the 64-wide MLP bucket) under
# WidthAware(base_width=64, max_multiplier=1): each hidden and output matrix wider than
# 64 takes 64/fan_in of the default's step (heldout: the 128-wide MLPs' matrices and
# the Transformer's 128-fan-in projections at 1/2), every other tensor the default's own.
# Evaluated on heldout (9 tasks, 1000 steps, 2 seeds) against the four tuned baselines,
# beside the default itself. Resumable: rerun the script.
cd "$(dirname "$0")/../../.."
ROOT=$PWD
PY=$ROOT/.venv/bin/python
COMMIT=${COMMIT:-a89b4f1}
SRC=/tmp/eval-$COMMIT
RES=$ROOT/benchmarks/results/mup-default_2026-12-06
[ -d $SRC ] || git worktree add -f $SRC $COMMIT
THETA=$RES/ScheduledAdam_cosine_hparams_muP64.msgpack
if [ ! -f $THETA ]; then
  (cd $SRC && $PY - "$THETA" <<'PY'
import sys
from learnopt import pretrained
from learnopt.learned_optimizers import theta_files
from learnopt.learned_optimizers.width_aware import WidthAware
entry = pretrained.load("ScheduledAdam_cosine_hparams")
lopt = WidthAware(entry.lopt, base_width=64, max_multiplier=1.0)
print(theta_files.save(sys.argv[1], lopt, entry.theta))
PY
  )
fi
for pair in "muP64:$THETA" "start:ScheduledAdam_cosine_hparams"; do
  name=${pair%%:*}; theta=${pair#*:}
  OUT=$ROOT/runs/heldout-mup-default-$name
  [ -f $OUT/done ] && continue
  (cd $SRC && nice -n 5 $PY -m learnopt evaluate --theta "$theta" --seeds 2 --out $OUT --overwrite) \
    && touch $OUT/done
  echo "$(date) heldout $name rc=$?"
done
