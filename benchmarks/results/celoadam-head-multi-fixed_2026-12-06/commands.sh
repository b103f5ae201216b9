#!/bin/bash
# Issue 32, recipe celoadam-head-multi, run again with the fixed ES estimators (frozen theta
# left unperturbed, 40bd92b; the first run, ../celoadam-head-multi_2026-12-06, perturbed all
# 36,865 values to train 65): the released CeloAdam's 65-value output head
# fine-tuned (everything else frozen) with PES on the wide MLP bucket, a conv bucket and
# the small Transformer LM family, the meta-loss the mean of the late log losses on a
# fresh training batch and an outer-valid batch, 1,500 steps; meta-valid (1000 steps,
# 3 seeds, start included) every 500 steps chooses theta_best on the validation loss.
# Then, if the chosen theta is not the start, it on heldout (9 tasks, 1000 steps,
# 2 seeds) against the four tuned baselines; CeloAdam itself was evaluated beside it on
# the same machine and baselines (../celoadam-mup_2026-12-06/commands.sh).
# Resumable: rerun the script. Everything runs the code of the commit that added the
# recipe (a worktree), so edits made on main while it runs do not reach it.
cd "$(dirname "$0")/../../.."
ROOT=$PWD
PY=$ROOT/.venv/bin/python
COMMIT=${COMMIT:-1bb9aad}
SRC=/tmp/eval-$COMMIT
RUN=$ROOT/runs/celoadam-head-multi-fixed
[ -d $SRC ] || git worktree add -f $SRC $COMMIT
if [ ! -f $RUN/done ]; then
  if [ -f $RUN/config.json ]; then
    (cd $SRC && nice -n 5 $PY -m learnopt meta-train --resume $RUN)
  else
    (cd $SRC && nice -n 5 $PY -m learnopt meta-train --recipe celoadam-head-multi --out $RUN)
  fi && touch $RUN/done
  echo "$(date) meta-train rc=$?"
fi
STEP=$($PY -c "from learnopt import checkpoints as c; print(c.load_theta_metadata('$RUN/theta_best.msgpack')['meta_training']['step'])")
if [ "$STEP" = 0 ]; then
  echo "meta-valid kept the start: nothing new to evaluate on heldout"; exit 0
fi
for pair in "chosen:$RUN/theta_best.msgpack"; do
  name=${pair%%:*}; theta=${pair#*:}
  OUT=$ROOT/runs/heldout-celoadam-head-multi-fixed-$name
  [ -f $OUT/done ] && continue
  (cd $SRC && nice -n 5 $PY -m learnopt evaluate --theta "$theta" --seeds 2 --out $OUT --overwrite) \
    && touch $OUT/done
  echo "$(date) heldout $name rc=$?"
done
