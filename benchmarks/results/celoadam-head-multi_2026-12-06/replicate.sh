#!/bin/bash
# Issue 32: an independent replicate of the heldout comparison on other seeds (base seed
# 100: seeds 100 and 101 instead of 0 and 1), tuned warmup-cosine Adam alone, over the
# three rates the 2-seed evaluations chose on every heldout task (0.01, 0.0316, 0.1), for
# the shipped default, CeloAdam, celoadam-head-multi's chosen theta and CeloAdam under
# width-aware steps (../celoadam-mup_2026-12-06 writes its theta file). It measures how
# far the win counts move on the seeds alone. Resumable: rerun the script.
cd "$(dirname "$0")/../../.."
ROOT=$PWD
PY=$ROOT/.venv/bin/python
COMMIT=${COMMIT:-bb064e2}
SRC=/tmp/eval-$COMMIT
[ -d $SRC ] || git worktree add -f $SRC $COMMIT
RES=$ROOT/benchmarks/results/celoadam-head-multi_2026-12-06
for pair in "default:ScheduledAdam_cosine_hparams" "CeloAdam:CeloAdam" "head-multi:$RES/theta_step500.msgpack" \
    "CeloAdam-muP64:$ROOT/benchmarks/results/celoadam-mup_2026-12-06/CeloAdam_muP64.msgpack"; do
  name=${pair%%:*}; theta=${pair#*:}
  OUT=$ROOT/runs/heldout-seed100-$name
  [ -f $OUT/done ] && continue
  (cd $SRC && nice -n 5 $PY -m learnopt evaluate --theta "$theta" --seeds 2 --seed 100 \
      --baselines AdamWarmupCosine --lrs 0.01,0.0316,0.1 --out $OUT --overwrite) && touch $OUT/done
  echo "$(date) heldout seed100 $name rc=$?"
done
