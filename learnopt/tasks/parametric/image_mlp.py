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
from learnopt.tasks.parametric import _family, cfgobject

__all__ = ["ParametricImageMLP", "ParametricImageMLP_Digits8_32x32", "sample_image_mlp"]


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
        """The :class:`~learnopt.tasks.fixed._common.MLP` ``(*hidden_layers, num_classes)``.

        See :meth:`~learnopt.tasks.parametric._family.ImageFamily.make_module`.
        """
        return _common.MLP((*self.hidden_layers, self.num_classes), act, init)


@_family.host_sampler
def sample_image_mlp(key: jax.Array) -> cfgobject.CFGObject:
    """A random :class:`ParametricImageMLP` configuration (host side)."""
    return _family.mlp_config(key, "ParametricImageMLP", "hidden_layers", num_classes=True)


@tasks_base.TASK_FAMILIES.register
def ParametricImageMLP_Digits8_32x32() -> ParametricImageMLP:  # noqa: N802
    """MLP 64-32-32-10 on 8x8 digits, batch 128; sampled activation and initializer.

    Returns:
      The task family, a :class:`ParametricImageMLP`.
    """
    fn = cfgobject.CONFIGURABLES.constructor("digits8_datasets")
    return ParametricImageMLP(
        lambda: fn(batch_size=128, image_size=(8, 8)),
        hidden_layers=(32, 32),
        name="ParametricImageMLP_Digits8_32x32",
    )
