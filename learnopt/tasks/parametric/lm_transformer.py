"""Sampled Transformer language models: :class:`ParametricLMTransformer`.

Shapes are fixed per family (``family.sample`` has nothing to draw, as in the notes'
library); :func:`sample_lm_transformer` draws a family configuration on the host
(8-128 dims per head x 8-128 heads, 1-8 layers, batch and sequence 4-512, vocabulary
100-10000 folded onto the data's) on the offline byte corpus.
"""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax

from learnopt.tasks import base as tasks_base
from learnopt.tasks.fixed import transformer_lm
from learnopt.tasks.parametric import _family, cfgobject, parametric_utils

__all__ = ["ParametricLMTransformer", "sample_lm_transformer"]


@cfgobject.configurable
class ParametricLMTransformer(_family.LMFamily):
    """Decoder-only Transformer LMs of one shape (see :mod:`learnopt.tasks.fixed.transformer_lm`).

    Args:
      datasets: a language :class:`~learnopt.tasks.datasets.base.Datasets` or a
        zero-argument factory returning one.
      vocab_size: the model's vocabulary (None: the data's).
      num_heads: attention heads per layer.
      num_layers: number of Transformer blocks.
      d_model: width of the residual stream.
      dropout_rate: dropout probability in training, in ``[0, 1)`` (default 0.1).
      name: the family's name (default: the class name).
    """

    def __init__(
        self,
        datasets: Any,
        vocab_size: int | None,
        num_heads: int,
        num_layers: int,
        d_model: int,
        dropout_rate: float = 0.1,
        name: str | None = None,
    ):
        super().__init__(datasets, vocab_size, name)
        self.num_heads, self.num_layers, self.d_model = (
            int(num_heads),
            int(num_layers),
            int(d_model),
        )
        self.dropout_rate = float(dropout_rate)

    def sample(self, key: jax.Array) -> cfgobject.CFGNamed:
        """An empty configuration (every member is the same model; only its init key differs).

        Args:
          key: unused.

        Returns:
          An empty ``CFGNamed``.
        """
        del key
        return cfgobject.CFGNamed("ParametricLMTransformer", {})

    def make_module(self, cfg: cfgobject.CFGNamed, vocab_size: int) -> nn.Module:
        """The :class:`~learnopt.tasks.fixed.transformer_lm.Transformer` (``cfg`` is empty).

        See :meth:`~learnopt.tasks.parametric._family.LMFamily.make_module`.
        """
        return transformer_lm.Transformer(
            self.num_heads, self.num_layers, self.d_model, vocab_size, self.dropout_rate
        )


@_family.host_sampler
def sample_lm_transformer(key: jax.Array) -> cfgobject.CFGObject:
    """A random :class:`ParametricLMTransformer` configuration (host side)."""
    keys = jax.random.split(key, 6)
    lf = cfgobject.LogFeature
    per_head = parametric_utils.log_int(keys[0], 8, 128)
    num_heads = parametric_utils.log_int(keys[1], 8, 128)
    model = {
        "d_model": lf(num_heads * per_head),
        "num_heads": lf(num_heads),
        "num_layers": lf(parametric_utils.log_int(keys[2], 1, 8)),
    }
    return _family.lm_config("ParametricLMTransformer", model, *keys[3:6])


def _make_default() -> ParametricLMTransformer:
    """1-layer, d_model 32, 2-head Transformer LMs on the byte corpus, batch 8 x 16."""
    fn = cfgobject.CONFIGURABLES.constructor("pystdlib_bytes_datasets")
    return ParametricLMTransformer(
        lambda: fn(batch_size=8, sequence_length=16),
        None,
        num_heads=2,
        num_layers=1,
        d_model=32,
        dropout_rate=0.0,
        name="ParametricLMTransformer_PyStdlibBytes_1layer_32width",
    )


tasks_base.TASK_FAMILIES.register(
    _make_default, name="ParametricLMTransformer_PyStdlibBytes_1layer_32width"
)
