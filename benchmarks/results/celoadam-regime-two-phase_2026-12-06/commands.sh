#!/bin/bash
# Issue 32, two phases from the released CeloAdam: phase 1 is celoadam-head-lm-valid-fine's
# chosen theta (its step-size head fine-tuned on the two LM families, 500 outer steps;
# ../celoadam-head-lm-valid-fine_2026-12-06/), phase 2 here: recipe celoadam-regime-only
# started from it (--init-theta; the regime head added at zero), the regime head alone
# (everything else frozen and unperturbed) with PES on the wide MLP bucket, outer-valid
# late log loss, outer rate 1e-3, 1,000 steps, meta-validated (1000 steps, 3 seeds,
# start included) every 250 steps. Then the chosen theta on heldout seeds 0-1 against
# the four tuned baselines and on seeds 100-101 against tuned warmup-cosine Adam, pooled
# with CeloAdam's own 4 seeds.
# Resumable: rerun the script. Everything runs the code of a pinned commit (a worktree).
cd "$(dirname "$0")/../../.."
ROOT=$PWD
PY=$ROOT/.venv/bin/python
COMMIT=${COMMIT:-17aa9b1}
SRC=/tmp/eval-$COMMIT
NAME=celoadam-regime-two-phase
RUN=$ROOT/runs/$NAME
HERE=$ROOT/benchmarks/results/${NAME}_2026-12-06
[ -d $SRC ] || git worktree add -f $SRC $COMMIT
if [ ! -f $RUN/done ]; then
  if [ -f $RUN/config.json ]; then
    (cd $SRC && nice -n 5 $PY -m learnopt meta-train --resume $RUN)
  else
    (cd $SRC && nice -n 5 $PY -m learnopt meta-train --recipe celoadam-regime-only --init-theta $ROOT/benchmarks/results/celoadam-head-lm-valid-fine_2026-12-06/theta_step500.msgpack --out $RUN)
  fi && touch $RUN/done
  echo "$(date) meta-train rc=$?"
fi
# What the regime head learned, on fixed loss curves (the final theta, chosen or not).
[ -f $HERE/schedule_probe.md ] || (cd $SRC && nice -n 5 $PY benchmarks/schedule_probe.py \
  --theta CeloAdam=CeloAdam \
  --theta phase1=$ROOT/benchmarks/results/celoadam-head-lm-valid-fine_2026-12-06/theta_step500.msgpack \
  --theta final=$RUN/theta.msgpack --out $HERE)
STEP=$($PY -c "from learnopt import checkpoints as c; print(c.load_theta_metadata('$RUN/theta_best.msgpack')['meta_training']['step'])")
if [ "$STEP" = 0 ]; then
  echo "meta-valid kept the start: nothing new to evaluate on heldout"
  exit 0
fi
OUT=$ROOT/runs/heldout-$NAME-chosen
if [ ! -f $OUT/done ]; then
  (cd $SRC && nice -n 5 $PY -m learnopt evaluate --theta $RUN/theta_best.msgpack --seeds 2 --out $OUT --overwrite) \
    && touch $OUT/done
  echo "$(date) heldout rc=$?"
fi
OUT100=$ROOT/runs/heldout-seed100-$NAME-chosen
if [ ! -f $OUT100/summary.csv ]; then
  (cd $SRC && nice -n 5 $PY -m learnopt evaluate --theta $RUN/theta_best.msgpack \
    --baselines AdamWarmupCosine --lrs 0.01,0.0316,0.1 --seed 100 --seeds 2 --out $OUT100 --overwrite)
fi
$PY benchmarks/seed_spread.py --out $HERE \
  "CeloAdam=$ROOT/runs/heldout-celoadam-start,$ROOT/runs/heldout-seed100-CeloAdam" \
  "$NAME=$OUT,$OUT100"
