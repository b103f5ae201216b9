"""A re-keyed cached baseline equals the same baseline trained afresh at today's code.

Run at 340f484 after rekey_cache.py, 2026-12-07: meta-valid's tuned-Adam sweep on the
SiLU MLP (7 rates, 3 seeds, 1000 steps) loaded from the re-keyed cache and trained again
differ by 0.0 in every train and valid loss.
"""

import json

import numpy as np

from learnopt.evaluation import periodic
from learnopt.evaluation.cache import BaselineCache, default_cache_dir, task_key
from learnopt.evaluation.engine import TaskEvaluator
from learnopt.evaluation.sweeps import lr_sweep
from learnopt.tasks import base as tasks_base

ev = periodic.from_settings(
    {
        **json.load(open("runs/celoadam-es-from-release-both/eval_config.json")),
        "tasks": ["ImageMLP_Mnist5k_10_Silu96x48"],
    },
    progress=False,
)
name = "ImageMLP_Mnist5k_10_Silu96x48"
task = tasks_base.get_task(name)
key = task_key(task)
sweep = lr_sweep("Adam", ev.learning_rates)
adam = TaskEvaluator(task, [sweep], num_steps=ev.steps, num_seeds=ev.seeds)
cached = BaselineCache(default_cache_dir()).load(key, adam.settings, [sweep])
print("cached:", list(cached), ev.learning_rates, ev.steps, ev.seeds)
fresh = adam.run().curves[sweep.name]
c = cached[sweep.name]
print(
    "max |diff| train",
    float(np.max(np.abs(fresh.train_loss - c.train_loss))),
    "valid",
    float(np.max(np.abs(fresh.valid_loss - c.valid_loss))),
)
