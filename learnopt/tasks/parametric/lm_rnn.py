"""Sampled recurrent language models: :class:`ParametricLMRNN` and ``sample_lm_rnn``.

The model is :class:`~learnopt.tasks.fixed.rnn_lm.RNNLanguageModel`; ``family.sample``
draws, traced, the initializer (and scale) of the embedding and output weights.
:func:`sample_lm_rnn` draws a family configuration on the host (core LSTM / GRU /
vanilla RNN / IRNN, widths 8-256, batch 4-512, sequence 4-512, vocabulary 100-10000
folded onto the data's), as the notes' library did, on the offline byte corpus.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import flax.linen as nn
import jax

from learnopt.tasks import base as tasks_base
from learnopt.tasks.fixed import rnn_lm
from learnopt.tasks.parametric import _family, cfgobject, parametric_utils

__all__ = [
    "ParametricLMRNN",
    "sample_lm_rnn",
    "lm_shape",
]


lm_shape = _family.lm_shape


@cfgobject.configurable
class ParametricLMRNN(_family.LMFamily):
    """Recurrent LMs of fixed shape; sampled embedding / output initializer.

    Args:
      datasets: a language Datasets (or a factory).
      rnn_size: hidden width of the core.
      embed_size: width of the token embedding.
      rnn_core_fn: ``hidden_size -> core`` (e.g. :class:`~learnopt.tasks.fixed.rnn_lm.LSTM`).
      vocab_size: the model's vocabulary (default: the data's); larger ids are folded.
      name: the family's name (default: the class name).
    """

    def __init__(
        self,
        datasets: Any,
        rnn_size: int,
        embed_size: int,
        rnn_core_fn: Callable[[int], Any] = rnn_lm.LSTM,
        vocab_size: int | None = None,
        name: str | None = None,
    ):
        super().__init__(datasets, vocab_size, name)
        self.rnn_size, self.embed_size = int(rnn_size), int(embed_size)
        self.rnn_core_fn = rnn_core_fn

    def sample(self, key: jax.Array) -> cfgobject.CFGNamed:
        """Draws, traced, the initializer (and scale) of the embedding and output weights.

        Args:
          key: a PRNG key.

        Returns:
          A ``CFGNamed`` with ``initializer`` (see
          :class:`~learnopt.tasks.parametric.parametric_utils.SampleInitializer`).
        """
        return cfgobject.CFGNamed(
            "ParametricLMRNN", {"initializer": parametric_utils.SampleInitializer.sample(key)}
        )

    def make_module(self, cfg: cfgobject.CFGNamed, vocab_size: int) -> nn.Module:
        """The :class:`~learnopt.tasks.fixed.rnn_lm.RNNLanguageModel` with ``cfg``'s initializer.

        See :meth:`~learnopt.tasks.parametric._family.LMFamily.make_module`.
        """
        init = parametric_utils.SampleInitializer.get_dynamic(cfg.values["initializer"])
        core_fn, size = self.rnn_core_fn, self.rnn_size
        return rnn_lm.RNNLanguageModel(
            lambda: core_fn(size), self.embed_size, vocab_size, embed_init=init, kernel_init=init
        )


for _core in rnn_lm.RNN_CORES:
    cfgobject.configurable(lambda c=_core: rnn_lm.RNN_CORES[c], name=f"{_core.lower()}_fn")


@_family.host_sampler
def sample_lm_rnn(key: jax.Array) -> cfgobject.CFGObject:
    """A random :class:`ParametricLMRNN` configuration (host side)."""
    keys = jax.random.split(key, 7)
    core = parametric_utils.choice(keys[5], ["lstm_fn", "gru_fn", "vanillarnn_fn", "irnn_fn"])
    model = {
        "rnn_size": cfgobject.LogFeature(parametric_utils.log_int(keys[0], 8, 256)),
        "embed_size": cfgobject.LogFeature(parametric_utils.log_int(keys[1], 8, 256)),
        "rnn_core_fn": cfgobject.CFGObject(core, {}),
    }
    return _family.lm_config("ParametricLMRNN", model, *keys[2:5])


def _make_default() -> ParametricLMRNN:
    """LSTM(32) LMs, embedding 16, on the byte corpus, batch 32 x 16; sampled init."""
    fn = cfgobject.CONFIGURABLES.constructor("pystdlib_bytes_datasets")
    return ParametricLMRNN(
        lambda: fn(batch_size=32, sequence_length=16),
        rnn_size=32,
        embed_size=16,
        rnn_core_fn=rnn_lm.LSTM,
        name="ParametricLMRNN_PyStdlibBytes_LSTM32",
    )


tasks_base.TASK_FAMILIES.register(_make_default, name="ParametricLMRNN_PyStdlibBytes_LSTM32")
