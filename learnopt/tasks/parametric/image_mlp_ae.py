"""Sampled MLP image auto-encoders: :class:`ParametricImageMLPAE`, ``sample_image_mlp_ae``.

Besides the activation and initializer, ``family.sample(key)`` draws three traced
switches, as in the notes' library: ``center_data`` (inputs mapped to ``[-1, 1]``),
``constrain_output`` (``tanh`` for centred data, else ``sigmoid``, on the output) and
``log_loss`` (the loss is ``log(mse + 1e-8)``). The loss is the per-example mean squared
error, averaged over the batch.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp

from learnopt.tasks import base as tasks_base
from learnopt.tasks.fixed import _common
from learnopt.tasks.parametric import _family, cfgobject, parametric_utils

__all__ = ["ParametricImageMLPAE", "sample_image_mlp_ae"]


class _SampledAE(_common.FlaxModelTask):
    def __init__(self, module, datasets, values, image_shape, batch_size, name):
        super().__init__(datasets, _common.image_abstract_batch(batch_size, image_shape), name=name)
        self._module = module
        self._values = values

    def make_module(self):
        return self._module

    def _center(self, image: jax.Array) -> jax.Array:
        image = jnp.reshape(image, (image.shape[0], -1))
        return jnp.where(self._values["center_data"], 2 * (image - 0.5), image)

    def model_input(self, batch: Any) -> jax.Array:
        return self._center(batch["image"])

    def loss_from_output(self, output: jax.Array, batch: Any) -> jax.Array:
        v = self._values
        target = self._center(batch["image"])
        output = output.astype(jnp.promote_types(output.dtype, jnp.float32))
        squashed = jnp.where(v["center_data"], jnp.tanh(output), jax.nn.sigmoid(output))
        pred = jnp.where(v["constrain_output"], squashed, output)
        per_example = jnp.mean(jnp.square(pred - target), axis=-1)
        per_example = jnp.where(v["log_loss"], jnp.log(per_example + 1e-8), per_example)
        return jnp.mean(per_example)

    def normalizer(self, loss: jax.Array) -> jax.Array:
        """Log scale (unless the loss already is), clipped to ``[-12, 1]``, then ``0.5 x + 10``."""
        out = jnp.where(self._values["log_loss"], loss, jnp.log(jnp.maximum(loss, 0) + 1e-8))
        out = jnp.nan_to_num(out, nan=1.0, posinf=1.0, neginf=1.0)
        return jnp.clip(out, -12.0, 1.0) * 0.5 + 10.0


@cfgobject.configurable
class ParametricImageMLPAE(tasks_base.TaskFamily):
    """MLP auto-encoders with hidden widths ``hidden_sizes`` on ``datasets``.

    Args:
      datasets: a :class:`~learnopt.tasks.datasets.base.Datasets` or a zero-argument
        factory returning one.
      hidden_sizes: widths of the hidden layers (the output is the flattened image).
      name: the family's name (default: the class name).
    """

    def __init__(self, datasets: Any, hidden_sizes: Sequence[int] = (32, 32), name=None):
        self.datasets = _family.resolve_datasets(datasets)
        self.image_shape, self.batch_size, _ = _family.image_info(self.datasets)
        self.hidden_sizes = tuple(int(h) for h in hidden_sizes)
        self._name = name

    def sample(self, key: jax.Array) -> cfgobject.CFGNamed:
        """Draws, traced, the activation, the initializer and the three loss switches.

        Args:
          key: a PRNG key.

        Returns:
          A ``CFGNamed`` with ``initializer``, ``activation`` and the booleans
          ``log_loss``, ``center_data`` and ``constrain_output`` (each true with
          probability 1/2).
        """
        keys = jax.random.split(key, 5)
        coin = lambda k: jax.random.bernoulli(k, 0.5, ())  # noqa: E731
        return cfgobject.CFGNamed(
            "ParametricImageMLPAE",
            {
                "initializer": parametric_utils.SampleInitializer.sample(keys[0]),
                "activation": parametric_utils.SampleActivation.sample(keys[1]),
                "log_loss": coin(keys[2]),
                "center_data": coin(keys[3]),
                "constrain_output": coin(keys[4]),
            },
        )

    def task_fn(self, cfg: cfgobject.CFGNamed) -> tasks_base.Task:
        """The auto-encoder for ``cfg`` on this family's datasets.

        Args:
          cfg: a configuration drawn by :meth:`sample` (its arrays may be traced).

        Returns:
          The task, named ``<family name>_sample``.
        """
        v = cfg.values
        module = _common.MLP(
            (*self.hidden_sizes, math.prod(self.image_shape)),
            parametric_utils.SampleActivation.get_dynamic(v["activation"]),
            parametric_utils.SampleInitializer.get_dynamic(v["initializer"]),
        )
        return _SampledAE(
            module, self.datasets, v, self.image_shape, self.batch_size, f"{self.name}_sample"
        )


@_family.host_sampler
def sample_image_mlp_ae(key: jax.Array) -> cfgobject.CFGObject:
    """A random :class:`ParametricImageMLPAE` configuration (host side), as the library."""
    return _family.mlp_config(key, "ParametricImageMLPAE", "hidden_sizes", num_classes=False)


def _make_default() -> ParametricImageMLPAE:
    """Auto-encoders 64-32-8-32-64 of 8x8 digits, batch 128; sampled act, init, loss form."""
    fn = cfgobject.CONFIGURABLES.constructor("digits8_datasets")
    return ParametricImageMLPAE(
        lambda: fn(batch_size=128, image_size=(8, 8)),
        hidden_sizes=(32, 8, 32),
        name="ParametricImageMLPAE_Digits8_32x8x32",
    )


tasks_base.TASK_FAMILIES.register(_make_default, name="ParametricImageMLPAE_Digits8_32x8x32")
