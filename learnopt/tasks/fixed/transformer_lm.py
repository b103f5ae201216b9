"""Decoder-only Transformer language models (Flax), and the fixed ``TransformerLM_*`` tasks.

:class:`Transformer` is the small pre-LayerNorm decoder of the notes' library (Vaswani
et al. 2017, "Attention is all you need"): token embedding (truncated normal, stddev 1),
then per layer ``h += dropout(attn(LN(h)))`` and ``h += dropout(mlp(LN(h)))`` with
causal multi-head self-attention (key size 32 per head, padding positions masked) and a
4x-wide GELU MLP, a final LayerNorm and a linear map to the vocabulary. Attention and
MLP weights use variance scaling ``2 / num_layers`` (fan-in, truncated normal). Like the
library's, it has no positional embedding: order reaches the model only through the
causal mask.

Tasks (byte-level, offline, on the ``pystdlib`` corpus; the library's configurations
ran on lm1b with a 32k vocabulary): ``TransformerLM_PyStdlibBytes_MultiRuntime_<i>``
are the library's smallest size configurations 0-5 and
``TransformerLM_PyStdlibBytes_5layer_32width`` its ``5layer`` family's smallest shape.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from learnopt.tasks.fixed import _common, _language

__all__ = ["CausalSelfAttention", "Transformer", "TransformerLMTask"]


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention; ``mask`` ``[B, 1, 1, T]`` marks valid keys.

    ``softmax(q k^T / sqrt(key_size))`` over the allowed keys (causal and valid), times
    ``v``, heads concatenated, then a linear map to ``model_size``.

    Attributes:
      num_heads: number of heads.
      key_size: width of each head's queries, keys and values.
      model_size: output width.
      kernel_init: initializer of the four projections.
    """

    num_heads: int
    key_size: int
    model_size: int
    kernel_init: Any

    @nn.compact
    def __call__(self, x: jax.Array, mask: jax.Array | None = None) -> jax.Array:
        """Attends each position to itself and the valid positions before it.

        Args:
          x: ``[B, T, D]``.
          mask: bool ``[B, 1, 1, T]``, True for valid (non-padding) keys, or None.

        Returns:
          ``[B, T, model_size]``.
        """
        seq_len = x.shape[-2]

        def project(name: str) -> jax.Array:
            y = nn.Dense(self.num_heads * self.key_size, kernel_init=self.kernel_init, name=name)(x)
            return y.reshape(*x.shape[:-1], self.num_heads, self.key_size)

        q, k, v = project("query"), project("key"), project("value")
        logits = jnp.einsum("...thd,...Thd->...htT", q, k) / np.sqrt(self.key_size)
        logits = logits.astype(jnp.promote_types(logits.dtype, jnp.float32))
        allowed = jnp.tril(jnp.ones((seq_len, seq_len), bool))
        if mask is not None:
            allowed = allowed & mask
        logits = jnp.where(allowed, logits, jnp.finfo(logits.dtype).min)
        weights = jax.nn.softmax(logits, axis=-1).astype(v.dtype)
        attn = jnp.einsum("...htT,...Thd->...thd", weights, v)
        attn = attn.reshape(*x.shape[:-1], self.num_heads * self.key_size)
        return nn.Dense(self.model_size, kernel_init=self.kernel_init, name="output")(attn)


class Transformer(nn.Module):
    """The decoder stack: ``tokens [B, T] -> logits [B, T, vocab_size]``.

    Attributes:
      num_heads: attention heads per layer.
      num_layers: number of layers.
      d_model: width of the residual stream.
      vocab_size: number of token ids.
      dropout_rate: dropout on each residual branch (training only).
      key_size: width of each attention head.
    """

    num_heads: int
    num_layers: int
    d_model: int
    vocab_size: int
    dropout_rate: float = 0.0
    key_size: int = 32

    @nn.compact
    def __call__(self, tokens: jax.Array, train: bool = True) -> jax.Array:
        """Logits of every position; keys with id 0 (padding) are masked out of attention.

        Args:
          tokens: int ids ``[B, T]``.
          train: apply dropout (it then needs a ``"dropout"`` rng when ``dropout_rate > 0``).

        Returns:
          Logits ``[B, T, vocab_size]``.
        """
        h = nn.Embed(
            self.vocab_size, self.d_model, embedding_init=nn.initializers.truncated_normal(1.0)
        )(tokens)
        init = nn.initializers.variance_scaling(2.0 / self.num_layers, "fan_in", "truncated_normal")
        mask = (tokens != 0)[:, None, None, :]
        rate = self.dropout_rate if train else 0.0
        for i in range(self.num_layers):
            a = nn.LayerNorm(epsilon=1e-5, name=f"h{i}_ln_1")(h)
            a = CausalSelfAttention(
                self.num_heads, self.key_size, self.d_model, init, name=f"h{i}_attn"
            )(a, mask)
            h = h + nn.Dropout(rate, deterministic=rate == 0.0)(a)
            m = nn.LayerNorm(epsilon=1e-5, name=f"h{i}_ln_2")(h)
            m = nn.Dense(4 * self.d_model, kernel_init=init, name=f"h{i}_mlp_0")(m)
            m = nn.Dense(self.d_model, kernel_init=init, name=f"h{i}_mlp_1")(jax.nn.gelu(m))
            h = h + nn.Dropout(rate, deterministic=rate == 0.0)(m)
        h = nn.LayerNorm(epsilon=1e-5, name="h_f")(h)
        return nn.Dense(self.vocab_size, kernel_init=_common.haiku_default_init, name="logits")(h)


class TransformerLMTask(_language.LanguageModelTask):
    """A :class:`Transformer` LM configured by a dict, as in the library.

    ``cfg`` holds ``num_heads``, ``d_model``, ``num_layers``, ``batch_size``,
    ``sequence_length`` and ``dropout_rate`` (and optionally ``vocab_size`` and
    ``dataset``, default ``"pystdlib_bytes"``).

    Args:
      cfg: the configuration.
      name: the task's name.
      param_dtype: dtype of the parameters.
    """

    def __init__(
        self,
        cfg: Mapping[str, Any],
        name: str = "TransformerLMTask",
        *,
        param_dtype: Any = jnp.float32,
    ):
        self.cfg = dict(cfg)
        batch_size, seq_len = int(cfg["batch_size"]), int(cfg["sequence_length"])
        super().__init__(
            _language.lm_datasets_factory(
                cfg.get("dataset", "pystdlib_bytes"), batch_size, seq_len
            ),
            batch_size=batch_size,
            sequence_length=seq_len,
            vocab_size=cfg.get("vocab_size"),
            param_dtype=param_dtype,
            name=name,
        )
        self._module = Transformer(
            num_heads=int(cfg["num_heads"]),
            num_layers=int(cfg["num_layers"]),
            d_model=int(cfg["d_model"]),
            vocab_size=self.vocab_size,
            dropout_rate=float(cfg.get("dropout_rate", 0.0)),
        )

    def make_module(self) -> nn.Module:
        """The LM (one module, built in the constructor).

        Returns:
          The :class:`Transformer`.
        """
        return self._module

    def normalizer(self, loss: jax.Array) -> jax.Array:
        """Clips the loss to ``[0, 1.5 * log(vocab_size)]``.

        Args:
          loss: a loss of this task.

        Returns:
          The clipped loss.
        """
        return jnp.clip(loss, 0.0, 1.5 * math.log(self.vocab_size))


def _register(name: str, cfg: Mapping[str, Any]) -> None:
    def make(param_dtype: Any = jnp.float32) -> TransformerLMTask:
        return TransformerLMTask(cfg, name, param_dtype=param_dtype)

    doc = _common.factory_doc(
        f"Byte-level Transformer LM on the Python standard library's sources (offline): "
        f"{cfg['num_layers']} layers, d_model {cfg['d_model']}, {cfg['num_heads']} heads, "
        f"batch {cfg['batch_size']} x {cfg['sequence_length']} tokens.",
        "TransformerLMTask",
    )
    _common.publish(globals(), name, make, doc)


# The library's smallest "MultiRuntime" size configurations:
# (num_heads, d_model, num_layers, batch_size, sequence_length, dropout_rate).
for _i, (_heads, _width, _layers, _batch, _seq, _dropout) in enumerate(
    [
        (5, 20, 1, 4, 8, 0.1),
        (6, 24, 1, 4, 8, 0.1),
        (4, 32, 2, 8, 8, 0.0),
        (4, 32, 1, 8, 16, 0.0),
        (4, 32, 2, 16, 4, 0.0),
        (4, 32, 1, 8, 32, 0.0),
    ]
):
    _register(
        f"TransformerLM_PyStdlibBytes_MultiRuntime_{_i}",
        {
            "num_heads": _heads,
            "d_model": _width,
            "num_layers": _layers,
            "batch_size": _batch,
            "sequence_length": _seq,
            "dropout_rate": _dropout,
        },
    )

# The library's "5layer" family (8 heads, batch 32 x 128, dropout 0.1) at its smallest
# width, and a 2-layer model small enough for CPU task suites.
for _width in (32,):
    _register(
        f"TransformerLM_PyStdlibBytes_5layer_{_width}width",
        {
            "num_heads": 8,
            "d_model": _width,
            "num_layers": 5,
            "batch_size": 32,
            "sequence_length": 128,
            "dropout_rate": 0.1,
        },
    )
_register(
    "TransformerLM_PyStdlibBytes_2layer_32width",
    {
        "num_heads": 2,
        "d_model": 32,
        "num_layers": 2,
        "batch_size": 16,
        "sequence_length": 32,
        "dropout_rate": 0.0,
    },
)
