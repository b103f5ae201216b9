"""learnopt: learned optimizers and meta-training in JAX, Flax and Optax.

Subpackages are imported on demand (``from learnopt.tasks import quadratics``) so that
``import learnopt`` stays fast and never imports TensorFlow.
"""

__version__ = "0.1.0"
