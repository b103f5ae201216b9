#!/bin/bash
# Issue 32, recipe celoadam-head-lm-valid: the released CeloAdam's 65-value output head
# fine-tuned (everything else frozen and unperturbed) with PES on the small Transformer
# and LSTM LM families alone, each family's estimate at unit norm (--family-balance
# norm), the late log loss on the outer-valid split, 1,000 steps. Meta-valid (1000
# steps, 3 seeds, start included) every 500 steps chooses theta_best on the validation
# loss.
# Then the head's own objective on its four families over whole runs, start against the
# final theta (benchmarks/family_objective.py), and, if the chosen theta is not the
# start, it on heldout (9 tasks, 1000 steps, 2 seeds) against the four tuned baselines;
# CeloAdam itself was evaluated the same way on the same baselines
# (../celoadam-mup_2026-12-06/commands.sh).
# Resumable: rerun the script. Everything runs the code of a pinned commit (a worktree),
# so edits made on main while it runs do not reach it.
cd "$(dirname "$0")/../../.."
ROOT=$PWD
PY=$ROOT/.venv/bin/python
COMMIT=${COMMIT:-31f1473}
SRC=/tmp/eval-$COMMIT
RUN=$ROOT/runs/celoadam-head-lm-valid
FAMILIES=ParametricLMTransformer_PyStdlibBytes_1layer_32width,ParametricLMRNN_PyStdlibBytes_LSTM32
[ -d $SRC ] || git worktree add -f $SRC $COMMIT
if [ ! -f $RUN/done ]; then
  if [ -f $RUN/config.json ]; then
    (cd $SRC && nice -n 5 $PY -m learnopt meta-train --resume $RUN)
  else
    (cd $SRC && nice -n 5 $PY -m learnopt meta-train --recipe celoadam-head-lm-valid --out $RUN)
  fi && touch $RUN/done
  echo "$(date) meta-train rc=$?"
fi
STEP=$($PY -c "from learnopt import checkpoints as c; print(c.load_theta_metadata('$RUN/theta_best.msgpack')['meta_training']['step'])")
if [ "$STEP" = 0 ]; then
  echo "meta-valid kept the start: nothing new to evaluate on heldout"
else
  for pair in "chosen:$RUN/theta_best.msgpack"; do
    name=${pair%%:*}; theta=${pair#*:}
    OUT=$ROOT/runs/heldout-celoadam-head-lm-valid-$name
    [ -f $OUT/done ] && continue
    (cd $SRC && nice -n 5 $PY -m learnopt evaluate --theta "$theta" --seeds 2 --out $OUT --overwrite) \
      && touch $OUT/done
    echo "$(date) heldout $name rc=$?"
  done
fi
FO=$ROOT/runs/fo-celoadam-head-lm-valid
if [ ! -f $FO/family_objective.md ]; then
  (cd $SRC && nice -n 5 $PY benchmarks/family_objective.py --theta start=CeloAdam \
    --theta final=$RUN/theta.msgpack --families $FAMILIES --num-tasks 8 --out $FO)
fi
# Added after the run: the chosen theta on heldout's seeds 100-101 against tuned
# warmup-cosine Adam (the baselines CeloAdam's seed-100 evaluation cached), pooled with
# seeds 0-1 by benchmarks/seed_spread.py.
OUT100=$ROOT/runs/heldout-seed100-celoadam-head-lm-valid-chosen
if [ ! -f $OUT100/summary.csv ]; then
  (cd $SRC && nice -n 5 $PY -m learnopt evaluate --theta $RUN/theta_best.msgpack \
    --baselines AdamWarmupCosine --lrs 0.01,0.0316,0.1 --seed 100 --seeds 2 --out $OUT100 --overwrite)
fi
$PY benchmarks/seed_spread.py --out $ROOT/benchmarks/results/celoadam-head-lm-valid_2026-12-06 \
  "CeloAdam=$ROOT/runs/heldout-celoadam-start,$ROOT/runs/heldout-seed100-CeloAdam" \
  "celoadam-head-lm-valid=$ROOT/runs/heldout-celoadam-head-lm-valid-chosen,$OUT100"
