#!/bin/bash
# Issue 32, controlledadam-multi-valid: controlledadam-multi (the shipped default under
# ControlledAdam, the controller alone meta-trained with PES on the wide MLP bucket, a
# conv bucket and the small Transformer LM family, 1,500 steps) with the meta-loss on the
# outer-valid split (late log validation loss); theta_best chosen on meta-valid's final
# validation loss (3 seeds, start included). Then, if the chosen theta is not the start,
# it and its start on heldout (9 tasks, 1000 steps, 2 seeds) against the four tuned
# baselines. Resumable: rerun the script.
#
# Everything runs the code of the commit that added the recipe (a worktree), so edits made
# on main while it runs do not reach it.
cd "$(dirname "$0")/../../.."
ROOT=$PWD
PY=$ROOT/.venv/bin/python
COMMIT=${COMMIT:-$(git log -n1 --format=%h -- learnopt/run/recipes.py)}
SRC=/tmp/eval-$COMMIT
RUN=$ROOT/runs/controlled-multi-valid
[ -d $SRC ] || git worktree add -f $SRC $COMMIT
if [ ! -f $RUN/done ]; then
  if [ -f $RUN/config.json ]; then
    (cd $SRC && nice -n 5 $PY -m learnopt meta-train --resume $RUN)
  else
    (cd $SRC && nice -n 5 $PY -m learnopt meta-train --recipe controlledadam-multi-valid --out $RUN)
  fi && touch $RUN/done
  echo "$(date) meta-train rc=$?"
fi
STEP=$($PY -c "from learnopt import checkpoints as c; print(c.load_theta_metadata('$RUN/theta_best.msgpack')['meta_training']['step'])")
if [ "$STEP" = 0 ]; then
  echo "meta-valid kept the start: nothing new to evaluate on heldout"; exit 0
fi
# The start was evaluated beside the chosen theta by this script's first run (the same
# machine and baselines; heldout_start_summary.md); to redo it, add
# "start:ScheduledAdam_cosine_hparams" to the loop.
for pair in "chosen:$RUN/theta_best.msgpack"; do
  name=${pair%%:*}; theta=${pair#*:}
  OUT=$ROOT/runs/heldout-controlled-multi-valid-$name
  [ -f $OUT/done ] && continue
  (cd $SRC && nice -n 5 $PY -m learnopt evaluate --theta "$theta" --seeds 2 --out $OUT --overwrite) \
    && touch $OUT/done
  echo "$(date) heldout $name rc=$?"
done
