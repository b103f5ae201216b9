"""The language-model tasks' shared plumbing: their batches, datasets and loss.

:class:`LanguageModelTask` is a :class:`~learnopt.tasks.fixed._common.FlaxModelTask`
whose model maps ``obs`` tokens ``[B, T]`` to logits and whose loss is the mean
next-token cross-entropy against ``target``; :func:`lm_datasets_factory` builds the
byte-level datasets lazily, on the first batch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from learnopt.tasks.datasets import base as datasets_base
from learnopt.tasks.fixed._common import (
    Batch,
    DatasetsOrFactory,
    FlaxModelTask,
    softmax_cross_entropy,
)

__all__ = ["LanguageModelTask", "lm_abstract_batch", "lm_datasets_factory"]


def lm_abstract_batch(batch_size: int, sequence_length: int) -> dict[str, jax.ShapeDtypeStruct]:
    """The abstract batch of a language-model task.

    Args:
      batch_size: sequences per batch ``B``.
      sequence_length: tokens per sequence ``T``.

    Returns:
      ``{"obs": int32 [B, T], "target": int32 [B, T]}`` as ``ShapeDtypeStruct`` s.
    """
    shape = (batch_size, sequence_length)
    return {
        "obs": jax.ShapeDtypeStruct(shape, jnp.int32),
        "target": jax.ShapeDtypeStruct(shape, jnp.int32),
    }


def lm_datasets_factory(
    dataset: str, batch_size: int, sequence_length: int
) -> Callable[[], datasets_base.Datasets]:
    """A lazy factory of byte-level LM datasets (``"pystdlib_bytes"`` so far).

    Args:
      dataset: ``"pystdlib_bytes"`` (or its alias ``"pystdlib"``).
      batch_size: sequences per batch.
      sequence_length: tokens per sequence.

    Returns:
      A zero-argument callable building the datasets.

    Raises:
      ValueError: an unknown dataset.
    """
    if dataset not in ("pystdlib_bytes", "pystdlib"):
        raise ValueError(f"unknown language dataset {dataset!r}; known: 'pystdlib_bytes'")

    def make() -> datasets_base.Datasets:
        from learnopt.tasks.datasets import language

        return language.pystdlib_bytes_datasets(batch_size, sequence_length)

    return make


class LanguageModelTask(FlaxModelTask):
    """Next-token prediction on ``{"obs", "target"}`` batches (int32 ``[B, T]``).

    The loss is the softmax cross-entropy of every position whose ``obs`` is not padding
    (id 0), averaged over those positions, as in the notes' library. With a
    ``vocab_size`` smaller than the data's, ids ``>= vocab_size`` fold onto
    ``1 + id % (vocab_size - 1)`` (the library's rule, which keeps 0 for padding).

    Args:
      datasets: datasets or a factory; batch_size, sequence_length: batch shape.
      vocab_size: the model's vocabulary; data_vocab_size: the data's (259 for bytes).
      param_dtype, name: as for :class:`FlaxModelTask`.
    """

    def __init__(
        self,
        datasets: DatasetsOrFactory,
        *,
        batch_size: int,
        sequence_length: int,
        vocab_size: int | None = None,
        data_vocab_size: int = 259,
        param_dtype: Any = jnp.float32,
        name: str | None = None,
    ):
        super().__init__(
            datasets,
            lm_abstract_batch(batch_size, sequence_length),
            param_dtype=param_dtype,
            name=name,
        )
        self.data_vocab_size = int(data_vocab_size)
        self.vocab_size = int(vocab_size) if vocab_size is not None else self.data_vocab_size
        if self.vocab_size < 2:
            raise ValueError(f"vocab_size must be >= 2, got {self.vocab_size}")

    def fold(self, ids: jax.Array) -> jax.Array:
        """Maps data ids into the model's vocabulary (identity when it is large enough).

        Args:
          ids: integer token ids.

        Returns:
          int32 ids in ``[0, vocab_size)``: ``1 + id % (vocab_size - 1)`` for ids
          ``>= vocab_size``, the others unchanged.
        """
        ids = jnp.asarray(ids).astype(jnp.int32)
        if self.vocab_size >= self.data_vocab_size:
            return ids
        return jnp.where(ids >= self.vocab_size, 1 + ids % (self.vocab_size - 1), ids)

    def model_input(self, batch: Batch) -> jax.Array:
        """The folded input tokens.

        Args:
          batch: ``{"obs": [B, T], "target": [B, T]}``.

        Returns:
          ``fold(batch["obs"])``, int32 ``[B, T]``.
        """
        return self.fold(batch["obs"])

    def loss_from_output(self, output: jax.Array, batch: Batch) -> jax.Array:
        """Mean cross-entropy of the folded targets over the non-padding positions.

        ``sum_t m_t CE(logits_t, target_t) / max(sum_t m_t, 1)`` with ``m_t = [obs_t != 0]``.

        Args:
          output: logits ``[B, T, vocab_size]``.
          batch: the batch.

        Returns:
          A scalar loss, in at least float32.
        """
        per_token = softmax_cross_entropy(output, self.fold(batch["target"]))
        mask = (jnp.asarray(batch["obs"]) != 0).astype(per_token.dtype)
        return jnp.sum(per_token * mask) / jnp.maximum(jnp.sum(mask), 1.0)
