#!/bin/bash
# Issue 32, recipe celoadam-mup-head-lm: the released CeloAdam under width-aware steps
# (WidthAware, base width 64, steps only shrunk), its 65-value output head fine-tuned
# (everything else frozen) with PES on the small Transformer and LSTM LM families and a
# conv bucket, the meta-loss the mean of the late log losses on a fresh training batch
# and an outer-valid batch, 1,000 steps; meta-valid (1000 steps, 3 seeds, start
# included) every 500 steps chooses theta_best on the validation loss.
# Then, if the chosen theta is not the start, it on heldout (9 tasks, 1000 steps,
# 2 seeds) against the four tuned baselines; its start, WidthAware(CeloAdam, 64), was
# evaluated the same way on the same baselines (../celoadam-mup_2026-12-06/commands.sh).
# Resumable: rerun the script. Everything runs the code of the commit that added the
# recipe (a worktree), so edits made on main while it runs do not reach it.
cd "$(dirname "$0")/../../.."
ROOT=$PWD
PY=$ROOT/.venv/bin/python
COMMIT=${COMMIT:-1419aba}
SRC=/tmp/eval-$COMMIT
RUN=$ROOT/runs/celoadam-mup-head-lm
[ -d $SRC ] || git worktree add -f $SRC $COMMIT
if [ ! -f $RUN/done ]; then
  if [ -f $RUN/config.json ]; then
    (cd $SRC && nice -n 5 $PY -m learnopt meta-train --resume $RUN)
  else
    (cd $SRC && nice -n 5 $PY -m learnopt meta-train --recipe celoadam-mup-head-lm --out $RUN)
  fi && touch $RUN/done
  echo "$(date) meta-train rc=$?"
fi
STEP=$($PY -c "from learnopt import checkpoints as c; print(c.load_theta_metadata('$RUN/theta_best.msgpack')['meta_training']['step'])")
if [ "$STEP" = 0 ]; then
  echo "meta-valid kept the start: nothing new to evaluate on heldout"; exit 0
fi
for pair in "chosen:$RUN/theta_best.msgpack"; do
  name=${pair%%:*}; theta=${pair#*:}
  OUT=$ROOT/runs/heldout-celoadam-mup-head-lm-$name
  [ -f $OUT/done ] && continue
  (cd $SRC && nice -n 5 $PY -m learnopt evaluate --theta "$theta" --seeds 2 --out $OUT --overwrite) \
    && touch $OUT/done
  echo "$(date) heldout $name rc=$?"
done
