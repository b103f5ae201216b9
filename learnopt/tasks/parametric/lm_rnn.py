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
from learnopt.tasks.fixed import _language, rnn_lm
from learnopt.tasks.parametric import _family, cfgobject, parametric_utils

__all__ = [
    "ParametricLMRNN",
    "sample_lm_rnn",
    "lm_shape",
]


class _SampledLM(_language.LanguageModelTask):
    def __init__(self, module: nn.Module, datasets: Any, **kwargs: Any):
        super().__init__(datasets, **kwargs)
        self._module = module

    def make_module(self) -> nn.Module:
        return self._module

    def normalizer(self, loss):
        return _family.lm_normalizer(loss, self.vocab_size)


def lm_shape(datasets: Any) -> dict[str, int]:
    """The batch shape and vocabulary of language datasets.

    Args:
      datasets: language datasets (``abstract_batch["obs"]`` and
        ``extra_info["vocab_size"]``).

    Returns:
      ``{"batch_size", "sequence_length", "data_vocab_size"}`` as ints.
    """
    obs = datasets.abstract_batch["obs"]
    return {
        "batch_size": int(obs.shape[0]),
        "sequence_length": int(obs.shape[1]),
        "data_vocab_size": int(datasets.extra_info["vocab_size"]),
    }


@cfgobject.configurable
class ParametricLMRNN(tasks_base.TaskFamily):
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
        self.datasets = _family.resolve_datasets(datasets)
        self.rnn_size, self.embed_size = int(rnn_size), int(embed_size)
        self.rnn_core_fn = rnn_core_fn
        self.vocab_size = vocab_size
        self._name = name

    @property
    def name(self) -> str:
        return self._name or type(self).__name__

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

    def task_fn(self, cfg: cfgobject.CFGNamed) -> tasks_base.Task:
        """The LM for ``cfg`` on this family's datasets.

        Args:
          cfg: a configuration drawn by :meth:`sample` (its arrays may be traced).

        Returns:
          The task (an :class:`~learnopt.tasks.fixed.rnn_lm.RNNLanguageModel` under the
          library's LM normalizer), named ``<family name>_sample``.
        """
        shape = lm_shape(self.datasets)
        vocab = int(self.vocab_size or shape["data_vocab_size"])
        init = parametric_utils.SampleInitializer.get_dynamic(cfg.values["initializer"])
        core_fn, size = self.rnn_core_fn, self.rnn_size
        module = rnn_lm.RNNLanguageModel(
            lambda: core_fn(size), self.embed_size, vocab, embed_init=init, kernel_init=init
        )
        return _SampledLM(
            module, self.datasets, vocab_size=vocab, name=f"{self.name}_sample", **shape
        )


for _core in rnn_lm.RNN_CORES:
    cfgobject.configurable(lambda c=_core: rnn_lm.RNN_CORES[c], name=f"{_core.lower()}_fn")


@cfgobject.configurable
def sample_lm_rnn(key: jax.Array) -> cfgobject.CFGObject:
    """A random :class:`ParametricLMRNN` configuration (host side).

    Args:
      key: a concrete PRNG key.

    Returns:
      A :class:`~learnopt.tasks.parametric.cfgobject.CFGObject` of a ``ParametricLMRNN``
      (``object_from_config`` builds it).
    """
    keys = iter(jax.random.split(key, 7))
    lf = cfgobject.LogFeature
    rnn_size = parametric_utils.log_int(next(keys), 8, 256)
    embed_size = parametric_utils.log_int(next(keys), 8, 256)
    batch_size = parametric_utils.log_int(next(keys), 4, 512)
    sequence_length = parametric_utils.log_int(next(keys), 4, 512)
    vocab_size = parametric_utils.log_int(next(keys), 100, 10000)
    core = parametric_utils.choice(next(keys), ["lstm_fn", "gru_fn", "vanillarnn_fn", "irnn_fn"])
    return cfgobject.CFGObject(
        "ParametricLMRNN",
        {
            "vocab_size": lf(vocab_size),
            "rnn_size": lf(rnn_size),
            "embed_size": lf(embed_size),
            "rnn_core_fn": cfgobject.CFGObject(core, {}),
            "datasets": cfgobject.CFGObject(
                "pystdlib_bytes_datasets",
                {"sequence_length": lf(sequence_length), "batch_size": lf(batch_size)},
            ),
        },
    )


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
