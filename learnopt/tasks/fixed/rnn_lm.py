"""Recurrent language models (Flax), and the fixed ``RNNLM_*`` tasks.

:class:`TeacherForcedRNNLM` embeds the input tokens, runs a recurrent core over time
from a *learned* initial state (one zero-initialized parameter per state tensor, tiled
over the batch) and maps every output to logits with a linear layer; the loss is the
next-token cross-entropy of :class:`~learnopt.tasks.fixed._language.LanguageModelTask`.
This is the notes' library's teacher-forced RNN LM.

Cores (Haiku's formulation, which the library used; weights truncated-normal with
scale ``1 / sqrt(fan_in)``, biases zero): :class:`LSTM` (gates from one linear map of
``[x, h]``, +1 on the forget gate; Hochreiter & Schmidhuber 1997), :class:`GRU`
(Cho et al. 2014), :class:`VanillaRNN` (``tanh``) and :class:`IRNN` (ReLU with an
identity-initialized recurrent matrix; Le et al. 2015, arXiv:1504.00941).

Names: ``RNNLM_<data>_Patch<sequence length>_<core><hidden>_Embed<embedding>``, batch
128, on the offline byte-level ``pystdlib`` corpus (``pystdlibbytes``; the library's
``lm1bbytes`` tasks have the same vocabulary and batches).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from learnopt.tasks.fixed import _common, _language

__all__ = [
    "GRU",
    "IRNN",
    "LSTM",
    "RNNLanguageModel",
    "TeacherForcedRNNLM",
    "VanillaRNN",
    "RNN_CORES",
]

_init = _common.haiku_default_init


class _Core(nn.RNNCellBase):
    """A recurrent core: ``(carry, x) -> (carry, output)``; ``initial_state(batch)``."""

    hidden_size: int

    def __call__(self, carry: Any, x: jax.Array):
        """One step of the recurrence.

        Args:
          carry: the state: ``h`` (``(h, c)`` for the LSTM), each ``[B, hidden_size]``.
          x: the inputs ``[B, D]``.

        Returns:
          ``(new carry, output)``; the output is the new ``h``, ``[B, hidden_size]``.
        """
        raise NotImplementedError

    def initial_state(self, batch_size: int) -> Any:
        """The zero state of a batch (:class:`RNNLanguageModel` learns its own, of this shape).

        Args:
          batch_size: the batch size ``B``.

        Returns:
          ``h``, float32 zeros ``[B, hidden_size]`` (for the LSTM ``(h, c)``, two of them).
        """
        return jnp.zeros((batch_size, self.hidden_size), jnp.float32)

    def initialize_carry(self, rng: jax.Array, input_shape: tuple[int, ...]) -> Any:
        del rng
        return self.initial_state(input_shape[0])

    @property
    def num_feature_axes(self) -> int:
        return 1


class LSTM(_Core):
    """LSTM; carry ``(h, c)``; gates ``i, g, f, o`` from one linear map of ``[x, h]``.

    ``c' = sigmoid(f + 1) c + sigmoid(i) tanh(g)``, ``h' = sigmoid(o) tanh(c')``.

    Attributes:
      hidden_size: width of ``h`` and ``c``.
      kernel_init: initializer of the gate weights.
    """

    kernel_init: Any = _init

    @nn.compact
    def __call__(self, carry: tuple[jax.Array, jax.Array], x: jax.Array):
        h, c = carry
        gates = nn.Dense(4 * self.hidden_size, kernel_init=self.kernel_init, name="linear")(
            jnp.concatenate([x, h.astype(x.dtype)], axis=-1)
        )
        i, g, f, o = jnp.split(gates, 4, axis=-1)
        c = jax.nn.sigmoid(f + 1) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
        h = jax.nn.sigmoid(o) * jnp.tanh(c)
        return (h, c), h

    def initial_state(self, batch_size: int):
        """``(h, c)``, see :meth:`!_Core.initial_state`."""
        zeros = jnp.zeros((batch_size, self.hidden_size), jnp.float32)
        return (zeros, zeros)


class GRU(_Core):
    """GRU: ``z, r`` gates; ``h' = (1 - z) h + z tanh(W x + U (r h) + b)``.

    Attributes:
      hidden_size: width of ``h``.
      kernel_init: initializer of the weights.
    """

    kernel_init: Any = _init

    @nn.compact
    def __call__(self, carry: jax.Array, x: jax.Array):
        h = carry.astype(x.dtype)
        hs = self.hidden_size
        xw = nn.Dense(3 * hs, kernel_init=self.kernel_init, name="input")(x)
        hu = nn.Dense(2 * hs, use_bias=False, kernel_init=self.kernel_init, name="gates")(h)
        z = jax.nn.sigmoid(xw[..., :hs] + hu[..., :hs])
        r = jax.nn.sigmoid(xw[..., hs : 2 * hs] + hu[..., hs:])
        a = jnp.tanh(
            xw[..., 2 * hs :]
            + nn.Dense(hs, use_bias=False, kernel_init=self.kernel_init, name="candidate")(r * h)
        )
        h = (1 - z) * h + z * a
        return h, h


class VanillaRNN(_Core):
    """``h' = act(W x + b + U h + c)`` with ``tanh`` (two biases, as Haiku's ``double_bias``).

    Attributes:
      hidden_size: width of ``h``.
      kernel_init: initializer of ``W``.
      recurrent_init: initializer of ``U``.
      activation: ``act``.
    """

    kernel_init: Any = _init
    recurrent_init: Any = _init
    activation: Callable[[jax.Array], jax.Array] = jnp.tanh

    @nn.compact
    def __call__(self, carry: jax.Array, x: jax.Array):
        h = carry.astype(x.dtype)
        pre = nn.Dense(self.hidden_size, kernel_init=self.kernel_init, name="input_to_hidden")(x)
        pre = pre + nn.Dense(
            self.hidden_size, kernel_init=self.recurrent_init, name="hidden_to_hidden"
        )(h)
        h = self.activation(pre)
        return h, h


def _identity_init(gain: float) -> Callable[..., jax.Array]:
    def init(key, shape, dtype=jnp.float32):
        del key
        return gain * jnp.eye(shape[0], shape[1], dtype=dtype)

    return init


def IRNN(hidden_size: int, gain: float = 1.0, **kwargs: Any) -> VanillaRNN:  # noqa: N802
    """ReLU RNN whose recurrent matrix starts at ``gain * I`` (Le et al. 2015).

    Le, Jaitly and Hinton 2015, "A Simple Way to Initialize Recurrent Networks of
    Rectified Linear Units", arXiv:1504.00941.

    Args:
      hidden_size: width of ``h``.
      gain: the scale of the identity.
      **kwargs: other :class:`VanillaRNN` fields (e.g. ``kernel_init``).

    Returns:
      A :class:`VanillaRNN`.
    """
    return VanillaRNN(
        hidden_size,
        recurrent_init=_identity_init(gain),
        activation=jax.nn.relu,
        **kwargs,
    )


#: Core constructors by name (``hidden_size -> core``).
RNN_CORES: dict[str, Callable[[int], _Core]] = {
    "LSTM": LSTM,
    "GRU": GRU,
    "VanillaRNN": VanillaRNN,
    "IRNN": IRNN,
}


class RNNLanguageModel(nn.Module):
    """Embedding -> recurrent core (learned initial state) -> linear logits.

    Attributes:
      core_fn: zero-argument callable returning the core.
      embedding_dim: width of the token embedding.
      vocab_size: number of token ids (embedding rows and logits).
      embed_init: initializer of the embedding.
      kernel_init: initializer of the output layer.
    """

    core_fn: Callable[[], _Core]
    embedding_dim: int
    vocab_size: int
    embed_init: Any = nn.initializers.truncated_normal(1.0)
    kernel_init: Any = _init

    @nn.compact
    def __call__(self, tokens: jax.Array, train: bool = True) -> jax.Array:
        """Logits of every position of a batch of sequences.

        Args:
          tokens: int ids ``[B, T]`` in ``[0, vocab_size)``.
          train: unused (no dropout or batch norm).

        Returns:
          Logits ``[B, T, vocab_size]``.
        """
        x = nn.Embed(self.vocab_size, self.embedding_dim, embedding_init=self.embed_init)(tokens)
        core = self.core_fn()
        template = core.initial_state(1)
        leaves, treedef = jax.tree_util.tree_flatten(template)
        learned = [
            self.param(f"initial_state_{i}", nn.initializers.zeros, leaf.shape, leaf.dtype)
            for i, leaf in enumerate(leaves)
        ]
        batch = tokens.shape[0]
        carry = jax.tree_util.tree_unflatten(
            treedef,
            [jnp.broadcast_to(leaf.astype(x.dtype), (batch, *leaf.shape[1:])) for leaf in learned],
        )
        out = nn.RNN(core, name="rnn")(x, initial_carry=carry)
        return nn.Dense(self.vocab_size, kernel_init=self.kernel_init, name="logits")(out)


class TeacherForcedRNNLM(_language.LanguageModelTask):
    """A teacher-forced recurrent LM (see the module docstring).

    Args:
      rnn_core_fn: zero-argument callable returning a core (e.g. ``lambda: LSTM(128)``).
      embedding_dim: width of the token embedding.
      vocab_size: the model's vocabulary (default: the data's, 259 bytes + specials).
      datasets: datasets or a zero-argument factory (the library passes a Datasets).
      batch_size, sequence_length: batch shape (default: from ``datasets`` when given).
      data_vocab_size: the data's vocabulary (default: from ``datasets``; give it, with
        the batch shape, for a factory).
      param_dtype: float dtype of the parameters made by ``init`` (default float32).
      name: the task's name (default: the class name).
    """

    def __init__(
        self,
        rnn_core_fn: Callable[[], _Core],
        embedding_dim: int,
        vocab_size: int | None,
        datasets: Any,
        *,
        batch_size: int | None = None,
        sequence_length: int | None = None,
        data_vocab_size: int | None = None,
        param_dtype: Any = jnp.float32,
        name: str | None = None,
    ):
        if batch_size is None or sequence_length is None or data_vocab_size is None:
            # A concrete Datasets: read the batch shape and vocabulary from it.
            batch_size, sequence_length = datasets.abstract_batch["obs"].shape
            data_vocab_size = datasets.extra_info["vocab_size"]
        super().__init__(
            datasets,
            batch_size=batch_size,
            sequence_length=sequence_length,
            vocab_size=vocab_size,
            data_vocab_size=data_vocab_size,
            param_dtype=param_dtype,
            name=name,
        )
        self._module = RNNLanguageModel(rnn_core_fn, int(embedding_dim), self.vocab_size)

    def make_module(self) -> nn.Module:
        """The LM (one module, built in the constructor).

        Returns:
          The :class:`RNNLanguageModel`.
        """
        return self._module


def _register(core: str, hidden: int, embed: int, seq_len: int, batch_size: int = 128) -> None:
    name = f"RNNLM_pystdlibbytes_Patch{seq_len}_{core}{hidden}_Embed{embed}"
    if batch_size != 128:
        name += f"_bs{batch_size}"
    core_fn = RNN_CORES[core]

    def make(param_dtype: Any = jnp.float32) -> TeacherForcedRNNLM:
        return TeacherForcedRNNLM(
            lambda: core_fn(hidden),
            embed,
            None,
            _language.lm_datasets_factory("pystdlib_bytes", batch_size, seq_len),
            batch_size=batch_size,
            sequence_length=seq_len,
            data_vocab_size=259,
            param_dtype=param_dtype,
            name=name,
        )

    doc = _common.factory_doc(
        f"Byte-level {core}({hidden}) LM, embedding {embed}, on the Python standard "
        f"library's sources, sequences of {seq_len}, batch {batch_size} (offline).",
        "TeacherForcedRNNLM",
    )
    _common.publish(globals(), name, make, doc)


# The library's lm1b-bytes configurations, on the offline byte-level corpus.
for _core, _hidden, _embed, _seq in [
    ("IRNN", 128, 64, 32),
    ("LSTM", 128, 64, 32),
    ("GRU", 128, 64, 32),
    ("VanillaRNN", 128, 64, 32),
    ("LSTM", 128, 64, 128),
    ("LSTM", 256, 128, 32),
    ("GRU", 256, 128, 32),
]:
    _register(_core, _hidden, _embed, _seq)
# Small ones that train in a few milliseconds per step on a CPU (task suites).
_register("LSTM", 32, 32, 16, batch_size=32)
_register("GRU", 32, 16, 16, batch_size=32)
_register("VanillaRNN", 64, 32, 16, batch_size=32)
