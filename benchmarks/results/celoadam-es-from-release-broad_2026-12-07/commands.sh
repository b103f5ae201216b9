#!/bin/bash
# Recipe celoadam-es-from-release-broad (learnopt/run/_recipe_settings.py,
# _CELOADAM_ES_FROM_RELEASE_BROAD): celoadam-es-from-release-both (the released CeloAdam,
# b2 0.999, weight decay 0.01 by progress on the hidden and output matrices, the two log
# scales by FullES over whole 1000-step runs on a training and an outer-valid batch, 50
# steps, chosen on meta-valid every 10 steps by both columns) with the perturbation's
# std at 0.8 instead of 0.3. Then on heldout as recipe 22 (chosen, start, final on seeds
# 0-1; chosen and start on seeds 100-101; seed spread). The start is recipe 22's (the
# same configuration and released theta): its two heldout evaluations are recipe 22's,
# copied (runs/heldout-celoadam-es-from-release-both-start{,-seed100}).
# The baseline key is 8aef6880ffb5 (as recipe 22's).
# Run from a worktree of the commit given as CODE. Resumable: meta-training resumes from
# its checkpoints, each finished step below is skipped.
cd "$(dirname "$0")/../../.."
ROOT=$PWD
PY=$ROOT/.venv/bin/python
CODE=${CODE:-8b538b5}
SRC=/tmp/celoadam-es-from-release-broad
[ -d $SRC ] || git worktree add -f --detach $SRC $CODE
NAME=celoadam-es-from-release-broad
RUN=$ROOT/runs/$NAME
HERE=$ROOT/benchmarks/results/${NAME}_2026-12-07
(cd $SRC && $PY -c "from learnopt.evaluation import fingerprint as f; h = f.source_hash()[:12]; print('baseline key', h); assert h == '8aef6880ffb5'") || exit 1
if [ ! -f $RUN/done ]; then
  if [ -f $RUN/config.json ]; then
    (cd $SRC && $PY -m learnopt meta-train --resume $RUN)
  else
    (cd $SRC && $PY -m learnopt meta-train --recipe $NAME --checkpoint-every 5 --out $RUN)
  fi && touch $RUN/done
  rc=$?; echo "$(date) meta-train rc=$rc"; [ $rc = 0 ] || exit $rc
fi
cp $RUN/eval.csv $RUN/eval.png $RUN/meta_loss.png $RUN/config.json $RUN/metrics.csv $HERE/ 2>/dev/null
cp $RUN/theta.msgpack $HERE/theta_final.msgpack
STEP=$($PY -c "from learnopt import checkpoints as c; print(c.load_theta_metadata('$RUN/theta_best.msgpack')['meta_training']['step'])")
cp $RUN/theta_best.msgpack $HERE/theta_chosen_step$STEP.msgpack
# The start (the released theta with the recipe's configuration, both heads at zero).
[ -f $HERE/theta_start.msgpack ] || (cd $SRC && PYTHONPATH=$SRC $PY -c "
import json
from learnopt import pretrained
from learnopt.learned_optimizers import celo_adam, theta_files
cfg = json.load(open('$RUN/config.json'))['lopt_config']
lopt = celo_adam.CeloAdam(**cfg)
theta_files.save('$HERE/theta_start.msgpack', lopt, lopt.extend_theta(pretrained.load('CeloAdam').theta))
")
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
(cd $SRC && PYTHONPATH=$SRC $PY -c "  # the same theta and configuration as recipe 22's start
import jax, numpy as np
from learnopt.learned_optimizers import theta_files as f
a = '$HERE/theta_start.msgpack'
b = '$ROOT/benchmarks/results/celoadam-es-from-release-both_2026-12-07/theta_start.msgpack'
ma, mb = f.read_metadata(a), f.read_metadata(b)
assert {k: v for k, v in ma.items() if k != 'created'} == {k: v for k, v in mb.items() if k != 'created'}
same = jax.tree_util.tree_map(lambda x, y: bool(np.array_equal(x, y)), f.load(a).theta, f.load(b).theta)
assert jax.tree_util.tree_all(same)
") || exit 1
evaluate chosen $RUN/theta_best.msgpack --seeds 2
evaluate start $HERE/theta_start.msgpack --seeds 2
evaluate final $HERE/theta_final.msgpack --seeds 2
LRS=0.00316,0.01,0.0316,0.1
evaluate chosen-seed100 $RUN/theta_best.msgpack --lrs $LRS --seed 100 --seeds 2
evaluate start-seed100 $HERE/theta_start.msgpack --lrs $LRS --seed 100 --seeds 2
H=$ROOT/runs/heldout-$NAME
for B in Adam AdamWarmupCosine; do
  mkdir -p $HERE/seed_spread_$B
  (cd $SRC && PYTHONPATH=$SRC $PY benchmarks/seed_spread.py --baseline $B --out $HERE/seed_spread_$B \
    "chosen (4 seeds)=$H-chosen,$H-chosen-seed100" "start (4 seeds)=$H-start,$H-start-seed100") \
    > $HERE/seed_spread_$B/seed_spread.md
done
echo "$(date) done"
