"""learnopt: learned optimizers and meta-training in JAX, Flax and Optax.

Subpackages are imported on demand (``from learnopt.tasks import quadratics``) so that
``import learnopt`` stays fast and never imports TensorFlow.
"""

#: The one place the version is written: pyproject.toml reads it (``[tool.setuptools.dynamic]``,
#: without importing the package), so the wheel's metadata and ``learnopt --version`` agree.
__version__ = "0.1.0"
