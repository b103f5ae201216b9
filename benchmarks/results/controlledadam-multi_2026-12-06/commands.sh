#!/bin/bash
# Issue 32, controlledadam-multi: controlledadam-from-default's controller (the shipped
# default under ControlledAdam, the controller alone meta-trained with PES on the late log
# training loss) meta-trained on three kinds of task instead of one MLP bucket: the wide
# MLP bucket, a conv bucket and the small Transformer LM family; 1,500 steps; theta_best
# chosen on meta-valid (normalized final train loss, 3 seeds, start included).
# Then the chosen theta on heldout (9 tasks, 1000 steps, 2 seeds) against the four tuned
# baselines; its start was evaluated the same way by
# ../controlledadam-from-default_2026-12-05/commands.sh (runs/heldout-controlled1-start).
# Resumable: rerun the script.
#
# Everything runs the code of commit 9fc14f7, as the previous controller run did, so that
# the baselines tuned there (their cache key hashes the source baselines run) serve both
# runs: the settings are that recipe's with --family given three times, --steps and the
# evaluation's --eval-every changed, which is what `--recipe controlledadam-multi` (added
# to learnopt.run.recipes after 9fc14f7) holds.
cd "$(dirname "$0")/../../.."
ROOT=$PWD
PY=$ROOT/.venv/bin/python
RUN=$ROOT/runs/controlled-multi
SRC=/tmp/eval-9fc14f7
[ -d $SRC ] || git worktree add -f $SRC 9fc14f7
if [ ! -f $RUN/done ]; then
  if [ -f $RUN/config.json ]; then
    (cd $SRC && nice -n 5 $PY -m learnopt meta-train --resume $RUN)
  else
    (cd $SRC && nice -n 5 $PY -m learnopt meta-train --recipe controlledadam-from-default \
      --family MetaTrain_MLP_Mnist5k20_64x64 --family MetaTrain_Conv_Digits8_8x16 \
      --family ParametricLMTransformer_PyStdlibBytes_1layer_32width \
      --steps 1500 --eval-every 500 --out $RUN)
  fi && touch $RUN/done
  echo "$(date) meta-train rc=$?"
fi
# Meta-valid kept the start (step 0; 2026-12-06): theta_best is the controller at its
# initial theta, the shipped default up to beta2's logit (4e-5 in float32), whose heldout
# figures ../controlledadam-from-default_2026-12-05/ holds, so this step was
# stopped. Rerun with CHOSEN_HELDOUT=1 to make it anyway.
OUT=$ROOT/runs/heldout-controlled-multi-chosen
if [ -n "$CHOSEN_HELDOUT" ] && [ ! -f $OUT/done ]; then
  (cd $SRC && nice -n 5 $PY -m learnopt evaluate --theta $RUN/theta_best.msgpack --seeds 2 \
    --out $OUT --overwrite) && touch $OUT/done
  echo "$(date) heldout chosen rc=$?"
fi
