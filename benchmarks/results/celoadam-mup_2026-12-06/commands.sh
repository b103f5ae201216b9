#!/bin/bash
# Issue 32, the width-aware lever on the published CeloAdam (no meta-training):
# WidthAware(CeloAdam, base_width=B, max_multiplier=1): each hidden and output matrix
# wider than B takes B/fan_in of CeloAdam's step, every other tensor CeloAdam's own.
# CeloAdam fits heldout's training sets better than tuned warmup-cosine Adam on 6/9 tasks
# and overfits the wide MLPs; the question is whether smaller steps on their wide
# matrices keep the train wins and add valid ones. Evaluated on heldout (9 tasks,
# 1000 steps, 2 seeds) against the four tuned baselines, beside CeloAdam itself.
# Resumable: rerun the script.
cd "$(dirname "$0")/../../.."
ROOT=$PWD
PY=$ROOT/.venv/bin/python
COMMIT=${COMMIT:-d8bcec9}
SRC=/tmp/eval-$COMMIT
RES=$ROOT/benchmarks/results/celoadam-mup_2026-12-06
[ -d $SRC ] || git worktree add -f $SRC $COMMIT
for B in ${WIDTHS:-64}; do
  THETA=$RES/CeloAdam_muP$B.msgpack
  [ -f $THETA ] || (cd $SRC && $PY - "$THETA" $B <<'PY'
import sys
from learnopt import pretrained
from learnopt.learned_optimizers import theta_files
from learnopt.learned_optimizers.width_aware import WidthAware
entry = pretrained.load("CeloAdam")
lopt = WidthAware(entry.lopt, base_width=int(sys.argv[2]), max_multiplier=1.0)
print(theta_files.save(sys.argv[1], lopt, entry.theta))
PY
  )
done
for pair in ${PAIRS:-muP64:$RES/CeloAdam_muP64.msgpack start:CeloAdam}; do
  name=${pair%%:*}; theta=${pair#*:}
  OUT=$ROOT/runs/heldout-celoadam-$name
  [ -f $OUT/done ] && continue
  (cd $SRC && nice -n 5 $PY -m learnopt evaluate --theta "$theta" --seeds 2 --out $OUT --overwrite) \
    && touch $OUT/done
  echo "$(date) heldout $name rc=$?"
done
