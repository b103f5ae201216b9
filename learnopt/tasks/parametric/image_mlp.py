"""Sampled MLP image classifiers: :class:`ParametricImageMLP` and ``sample_image_mlp``.

A :class:`ParametricImageMLP` fixes the shapes (dataset, image size, batch size, hidden
widths); ``family.sample(key)`` draws, traced, the activation (one of 12) and the weight
initializer with its scale (one of 5, scale in ``[0.5, 2]``), so a population of members
is one ``vmap``. :func:`sample_image_mlp` draws a family configuration on the host
(widths 8-128, 0-4 hidden layers, images 4-32 pixels, batch 4-512, an offline dataset),
as the notes' library did.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import flax.linen as nn
import jax

from learnopt.tasks import base as tasks_base
from learnopt.tasks.fixed import _common
from learnopt.tasks.parametric import _family, cfgobject, parametric_utils

__all__ = ["ParametricImageMLP", "sample_image_mlp"]


@cfgobject.configurable
class ParametricImageMLP(_family.ImageFamily):
    """MLPs with hidden widths ``hidden_layers`` on ``datasets``; sampled act and init.

    Args:
      datasets: a :class:`~learnopt.tasks.datasets.base.Datasets` (or a factory).
      num_classes: output width (default: the dataset's).
      hidden_layers: hidden widths.
      name: family name.
    """

    def __init__(
        self,
        datasets: Any,
        num_classes: int | None = None,
        hidden_layers: Sequence[int] = (32, 32),
        name: str | None = None,
    ):
        super().__init__(datasets, num_classes, name)
        self.hidden_layers = tuple(int(h) for h in hidden_layers)

    def make_module(self, act: Callable, init: Callable) -> nn.Module:
        """The MLP with activation ``act`` and weight initializer ``init``.

        Args:
          act: the activation (a traced choice).
          init: a Flax initializer ``(key, shape, dtype) -> array`` (a traced choice).

        Returns:
          An :class:`~learnopt.tasks.fixed._common.MLP` of widths
          ``(*hidden_layers, num_classes)``.
        """
        return _common.MLP((*self.hidden_layers, self.num_classes), act, init)


@cfgobject.configurable
def sample_image_mlp(key: jax.Array) -> cfgobject.CFGObject:
    """A random :class:`ParametricImageMLP` configuration (host side).

    Args:
      key: a concrete PRNG key.

    Returns:
      A :class:`~learnopt.tasks.parametric.cfgobject.CFGObject` of a ``ParametricImageMLP``
      (``object_from_config`` builds it).
    """
    k1, k2, k3, k4, k5 = jax.random.split(key, 5)
    hidden_size = parametric_utils.log_int(k1, 8, 128)
    num_layers = parametric_utils.choice(k2, [0, 1, 2, 3, 4])
    image_size = parametric_utils.log_int(k3, 4, 32)
    batch_size = parametric_utils.log_int(k4, 4, 512)
    dataset = parametric_utils.SampleImageDataset.sample(k5)
    lf = cfgobject.LogFeature
    return cfgobject.CFGObject(
        "ParametricImageMLP",
        {
            "hidden_layers": lf(num_layers * [hidden_size]),
            "num_classes": parametric_utils.SampleImageDataset.num_classes(dataset),
            "datasets": cfgobject.CFGObject(
                dataset,
                {"image_size": lf((image_size, image_size)), "batch_size": lf(batch_size)},
            ),
        },
    )


def _register(name: str, dataset: str, image_size, hidden: Sequence[int], batch: int, doc: str):
    def make() -> ParametricImageMLP:
        fn = cfgobject.CONFIGURABLES.constructor(f"{dataset}_datasets")
        return ParametricImageMLP(
            lambda: fn(batch_size=batch, image_size=image_size), hidden_layers=hidden, name=name
        )

    make.__name__ = make.__qualname__ = name
    make.__doc__ = f"{doc}\n\nReturns:\n  The task family, a :class:`ParametricImageMLP`.\n"
    tasks_base.TASK_FAMILIES.register(make, name=name)
    globals()[name] = make
    __all__.append(name)


_register(
    "ParametricImageMLP_Digits8_32x32",
    "digits8",
    (8, 8),
    (32, 32),
    128,
    "MLP 64-32-32-10 on 8x8 digits, batch 128; sampled activation and initializer.",
)
