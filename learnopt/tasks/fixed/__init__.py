"""Fixed (single, non-sampled) tasks, e.g. :mod:`learnopt.tasks.fixed.image_mlp`."""
