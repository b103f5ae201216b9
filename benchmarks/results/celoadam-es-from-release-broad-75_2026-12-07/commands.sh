#!/bin/bash
# Recipe 23 extended to 75 outer steps: `learnopt meta-train --recipe
# celoadam-es-from-release-broad --steps 75`. Its meta-valid score was still falling at
# step 50 (b2 still rising, the decay still falling). Run as recipe 23's run resumed from
# its step-50 checkpoint with --steps 75 (a copy of runs/celoadam-es-from-release-broad;
# --resume is bit-identical to an uninterrupted run, and nothing in the run depends on
# the total number of steps). Then on heldout as recipe 23 (chosen and final on seeds
# 0-1, chosen on seeds 100-101; the start's evaluations are recipe 22's).
# Run from a worktree of the commit given as CODE (recipe 23's). Resumable.
cd "$(dirname "$0")/../../.."
ROOT=$PWD
PY=$ROOT/.venv/bin/python
CODE=${CODE:-8b538b5}
SRC=/tmp/celoadam-es-from-release-broad
[ -d $SRC ] || git worktree add -f --detach $SRC $CODE
NAME=celoadam-es-from-release-broad-75
RUN=$ROOT/runs/$NAME
HERE=$ROOT/benchmarks/results/${NAME}_2026-12-07
(cd $SRC && $PY -c "from learnopt.evaluation import fingerprint as f; h = f.source_hash()[:12]; print('baseline key', h); assert h == '8aef6880ffb5'") || exit 1
if [ ! -f $RUN/done ]; then
  if [ ! -f $RUN/config.json ]; then
    [ -f $ROOT/runs/celoadam-es-from-release-broad/done ] || { echo "recipe 23 first"; exit 1; }
    cp -r $ROOT/runs/celoadam-es-from-release-broad $RUN && rm -f $RUN/done $RUN/.lock
  fi
  (cd $SRC && $PY -m learnopt meta-train --resume $RUN --steps 75) && touch $RUN/done
  rc=$?; echo "$(date) meta-train rc=$rc"; [ $rc = 0 ] || exit $rc
fi
cp $RUN/eval.csv $RUN/eval.png $RUN/meta_loss.png $RUN/config.json $RUN/metrics.csv $HERE/ 2>/dev/null
cp $RUN/theta.msgpack $HERE/theta_final.msgpack
STEP=$($PY -c "from learnopt import checkpoints as c; print(c.load_theta_metadata('$RUN/theta_best.msgpack')['meta_training']['step'])")
cp $RUN/theta_best.msgpack $HERE/theta_chosen_step$STEP.msgpack
evaluate() {  # evaluate LABEL THETA [extra flags]: heldout, summary copied into HERE
  local label=$1 theta=$2; shift 2
  local out=$ROOT/runs/heldout-$NAME-$label
  [ -f $out/done ] || { (cd $SRC && $PY -m learnopt evaluate --theta $theta \
    --baselines Adam,AdamWarmupCosine --out $out --overwrite "$@") && touch $out/done; } || exit 1
  cp $out/summary.md $HERE/heldout_${label}_summary.md; cp $out/summary.csv $HERE/heldout_${label}_summary.csv
}
for L in start start-seed100; do  # the start's evaluations are recipe 22's
  [ -d $ROOT/runs/heldout-$NAME-$L ] || cp -r $ROOT/runs/heldout-celoadam-es-from-release-both-$L $ROOT/runs/heldout-$NAME-$L
done
evaluate chosen $RUN/theta_best.msgpack --seeds 2
evaluate start $ROOT/benchmarks/results/celoadam-es-from-release-both_2026-12-07/theta_start.msgpack --seeds 2
evaluate final $HERE/theta_final.msgpack --seeds 2
LRS=0.00316,0.01,0.0316,0.1
evaluate chosen-seed100 $RUN/theta_best.msgpack --lrs $LRS --seed 100 --seeds 2
evaluate start-seed100 $ROOT/benchmarks/results/celoadam-es-from-release-both_2026-12-07/theta_start.msgpack --lrs $LRS --seed 100 --seeds 2
H=$ROOT/runs/heldout-$NAME
for B in Adam AdamWarmupCosine; do
  mkdir -p $HERE/seed_spread_$B
  (cd $SRC && PYTHONPATH=$SRC $PY benchmarks/seed_spread.py --baseline $B --out $HERE/seed_spread_$B \
    "chosen (4 seeds)=$H-chosen,$H-chosen-seed100" "start (4 seeds)=$H-start,$H-start-seed100") \
    > $HERE/seed_spread_$B/seed_spread.md
done
echo "$(date) done"
