"""Meta-trained thetas that ship with learnopt: ``learnopt.pretrained.load(name)``.

::

    from learnopt import pretrained

    trained = pretrained.load()                      # the default entry, a TrainedLOpt
    tx = trained.as_optax(num_steps=1000, weight_decay=1e-4)  # the planned run length
    # updates, state = tx.update(grads, state, params, value=loss)

Each entry is a theta file with metadata (:mod:`learnopt.learned_optimizers.theta_files`)
in this package: the architecture and its configuration, the learnopt version, the
licence, and either the command that meta-trained it here (Apache-2.0, as learnopt) or,
for a published optimizer's released weights, their source (repository, commit, path,
sha256), paper and licence (its text in ``LICENSE-<source>.txt`` beside the entry). Its evaluation
(``learnopt evaluate`` on the held-out suite against tuned Adam) is in
``<name>.md`` beside it (:func:`describe`).

Entries:

``ScheduledAdam_cosine_hparams`` (the default)
    ``ScheduledAdam`` on a fixed 5%-warmup cosine schedule with 8 meta-trained values
    (rate, step offsets per tensor kind, with conv kernels and embeddings on the
    matrices', betas, epsilon; 0.2 kB), meta-trained with PES from Adam's defaults for
    3,000 outer steps (43 minutes on a 2-core CPU, ``learnopt meta-train --recipe
    scheduledadam-cosine-hparams-wide-shared``) on the late log training loss of mnist
    MLPs at 20x20 pixels; it learned a peak rate of 0.0257 for weight tensors, 0.0027
    for biases, beta1 0.86. It reads the run length: ``as_optax(num_steps=T)``. On the
    held-out suite (1,000 steps, 2 seeds) it wins 7 of 9 tasks on final train loss and
    7 of 9 on final valid loss against Adam tuned per task over 9 rates, 8 of 9 against
    the untuned reference schedule, 2 of 9 (train) / 4 of 9 (valid) against Adam with
    warmup and cosine decay tuned per task, and ends below its starting point (the same
    schedule at 1e-3) on 9 of 9 (``docs/meta-training-results.md``).
``ScheduledAdam_cosine_valid``
    ``ScheduledAdam`` on a warmup-cosine prior (153 values, 2.3 kB): Adam's direction
    with a learned correction of a 5%-warmup, cosine-to-zero schedule over the fraction
    of training ``t / T``, per-kind step offsets, betas and epsilon; meta-trained with PES
    for 4,097 outer steps (25 minutes on a 2-core CPU, ``learnopt meta-train --recipe
    scheduledadam-cosine-valid``) on the late log *validation* loss of the two 8x8 MLP
    buckets. It reads the run length: ``as_optax(num_steps=T)`` (an error names it
    when missing). On the held-out suite (1,000 steps, 2 seeds) it wins 7 of 9 tasks on
    final train loss and 6 of 9 on final valid loss against Adam tuned per task over 9
    rates, 8 of 9 against the untuned reference schedule, and 1 of 9 (train) / 3 of 9
    (valid) against Adam with warmup and cosine decay tuned per task. Against its own
    starting point (Adam with that schedule at 0.0316, untrained) it is better on valid
    loss on 7 of 9 tasks and worse on train loss on 7 of 9: most of its strength is the
    hand-designed schedule it starts from (``docs/meta-training-results.md``).
``Celo``
    The released weights of Celo (Moudgil et al., 2025, arXiv:2501.12670;
    github.com/amoudgl/celo at 66d9761, ``algoperf/submissions/celo/theta.state``, MIT
    licence, ``LICENSE-celo.txt`` beside it): VeLO's per-parameter MLP under a learned
    LSTM schedule (37,089 values, 148 kB), meta-trained by its authors for about 24
    GPU-hours on small MLP tasks. Converted once, without unpickling, by
    ``examples/convert_published.py Celo`` (which reproduces this file from the release
    bit for bit). It reads the run length: ``as_optax(num_steps=T)``. learnopt's own
    evaluation on the held-out suite is in ``describe("Celo")``.
``CeloAdam``
    The released weights of Celo-Adam (same paper and release,
    ``algoperf/submissions/celo_adam/theta.state``, MIT licence): Celo's LSTM scheduler
    (36,865 values, 146 kB) multiplying Adam's step (betas 0.9, 0.999, base rate 1e-3),
    the variant the release reports stable on AlgoPerf's large workloads. Converted by
    ``examples/convert_published.py CeloAdam``; equal to the release's own
    ``celo_adam.py`` run on learnopt within 1e-7 relative
    (``benchmarks/compare_published.py``). It reads the loss and the run length:
    ``as_optax(num_steps=T)``, ``value=loss``.
``Celo2``
    The released weights of Celo2 (Moudgil et al., 2026, arXiv:2602.19142) as PyLO ships
    them (github.com/Belilovsky-Lab/pylo at faf6fcb, ``pylo/models/celo2_weights.pt``,
    BSD-3-Clause licence, ``LICENSE-pylo.txt`` beside it): a normalized per-parameter MLP
    (347 values, 4 kB) with Newton-Schulz on the matrices and AdamW on the vectors and
    the input and output layers, meta-trained by its authors for 4.5 GPU-hours. Converted
    from the torch file without torch or general unpickling by
    ``examples/convert_published.py Celo2``, configured as PyLO's ``Celo2_naive`` runs by
    default (learning rate 1e-3, no schedule, no weight decay), and equal to it within
    4e-7 relative (``benchmarks/compare_celo2_torch.py``). ``as_optax()`` needs no run
    length. At that fixed rate it under-trains the held-out suite's 1000-step runs
    (``describe("Celo2")``).
``MLPLOpt_mlp8k``
    ``MLPLOpt`` (626 values, 3.9 kB), meta-trained with PES for 8,000 outer steps (35
    minutes on a 2-core CPU) on two MLP families (digits and mnist5k at 8x8). On the
    held-out suite, after 1,000 steps over 3 seeds, it beats Adam tuned over 9 learning
    rates on none of the 9 tasks (loss ratios 1.15-1.4 on the conv nets and language
    models, far behind on the MLPs; it fails to train the 3-layer GELU MLP): kept as the
    per-parameter learned optimizer's honest figure, not a replacement for tuned Adam.
    ``describe("MLPLOpt_mlp8k")`` has the table.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any

__all__ = [
    "DEFAULT",
    "names",
    "path",
    "find",
    "load",
    "metadata",
    "describe",
    "source",
    "reads",
]

#: The entry :func:`load` returns when no name is given.
DEFAULT = "ScheduledAdam_cosine_hparams"


def _folder() -> Path:
    import importlib.resources

    return Path(str(importlib.resources.files(__name__)))


def names() -> list[str]:
    """The names of the shipped thetas.

    Returns:
      The entry names, sorted.
    """
    return sorted(p.stem for p in _folder().glob("*.msgpack"))


def path(name: str = DEFAULT) -> Path:
    """The theta file of entry ``name`` (raises ``KeyError`` listing the entries).

    Args:
      name: the entry (see :func:`names`; default :data:`DEFAULT`).

    Returns:
      The path of its ``.msgpack`` file inside the installed package.

    Raises:
      TypeError: ``name`` is not a string.
      KeyError: no such entry (:class:`~learnopt.registry.UnknownNameError`), also for a
        path (load a theta file with
        :func:`learnopt.learned_optimizers.theta_files.load`).
    """
    from learnopt.registry import UnknownNameError, unknown_name_message

    if not isinstance(name, str):
        raise TypeError(f"name must be a string, got {type(name).__name__}")
    file = _folder() / f"{name}.msgpack"
    if name not in names():  # a name, never a path ("../pretrained/X" is not an entry)
        raise UnknownNameError(
            unknown_name_message("pretrained theta", name, names(), listing="pretrained")
        )
    return file


def find(name_or_path: str | os.PathLike) -> Path:
    """A theta file given as a path or as a shipped entry's name, as every command takes it.

    A file at ``name_or_path`` wins; otherwise it must be an entry's name. This is how
    ``learnopt evaluate --theta`` and ``learnopt meta-train --init-theta`` read their
    argument.

    Args:
      name_or_path: a theta file, or the name of an entry (see :func:`names`).

    Returns:
      The file's path.

    Raises:
      FileNotFoundError: neither a file nor an entry (the message lists the entries);
        ``IsADirectoryError`` for a folder (a run folder: its ``theta.msgpack`` is named).
    """
    if not isinstance(name_or_path, str | os.PathLike):
        raise TypeError(f"expected a theta file or an entry's name, got {name_or_path!r}")
    file = Path(name_or_path)
    if file.is_file():
        return file
    if file.is_dir():
        inner = file / "theta.msgpack"
        hint = f" (its theta file: {inner})" if inner.is_file() else ""
        raise IsADirectoryError(f"{file} is a folder, not a theta file{hint}")
    if str(name_or_path) in names():
        return path(str(name_or_path))
    raise FileNotFoundError(
        f"no theta file at {file}, and no shipped entry of that name (entries: "
        f"{', '.join(names())})"
    )


def load(name: str = DEFAULT) -> Any:
    """Entry ``name`` as a :class:`~learnopt.learned_optimizers.theta_files.TrainedLOpt`.

    ``lopt, theta = pretrained.load(name)`` unpacks it; ``.as_optax()`` is the optax
    transformation.

    Args:
      name: the entry (see :func:`names`; default :data:`DEFAULT`).

    Returns:
      The learned optimizer, rebuilt from the file's metadata, with its theta.
    """
    from learnopt.learned_optimizers import theta_files

    return theta_files.load(path(name))


def metadata(name: str = DEFAULT) -> dict[str, Any]:
    """The metadata of entry ``name`` (architecture, config, how it was meta-trained).

    Args:
      name: the entry (see :func:`names`; default :data:`DEFAULT`).

    Returns:
      The metadata dict (see :mod:`~learnopt.learned_optimizers.theta_files`).
    """
    from learnopt.learned_optimizers import theta_files

    return theta_files.read_metadata(path(name)) or {}


def describe(name: str = DEFAULT) -> str:
    """The provenance and evaluation of entry ``name`` (its ``<name>.md``).

    Args:
      name: the entry (see :func:`names`; default :data:`DEFAULT`).

    Returns:
      The text of ``<name>.md``, or "" if the entry has none.
    """
    doc = path(name).with_suffix(".md")
    return doc.read_text() if doc.is_file() else ""


def source(name: str = DEFAULT) -> str:
    """Where entry ``name`` comes from, in one line (what ``learnopt list pretrained`` shows).

    Args:
      name: the entry (see :func:`names`; default :data:`DEFAULT`).

    Returns:
      ``"github.com/amoudgl/celo@66d9761 (MIT)"`` for a published optimizer's released
      weights, ``"learnopt meta-train --recipe ... (Apache-2.0)"`` for one meta-trained here.
    """
    md = metadata(name)
    training = md.get("meta_training") or {}
    licence = md.get("licence") or "licence not stated"
    if training.get("published"):
        src = training["source"]
        return f"{src['repository']}@{src['commit'][:7]} ({licence})"
    return f"{training.get('command', 'learnopt')} ({licence})"


@functools.cache
def reads(name: str = DEFAULT) -> dict[str, bool]:
    """Which inputs entry ``name``'s updates depend on besides the gradients, measured.

    Runs the entry for 6 steps on a small fixed problem (a 3x4 matrix and a vector) and
    compares the parameters: with rising instead of falling losses (``loss``), and with a
    run length of 10,000 instead of 100 (``run_length``). What an entry reads is thus the
    behaviour of its code and weights, not a claim (the model cards' "Reads" lines are
    checked against it).

    Args:
      name: the entry (see :func:`names`; default :data:`DEFAULT`).

    Returns:
      ``{"loss": bool, "run_length": bool}``: whether ``update(..., loss=)`` and
      ``as_optax(num_steps=)`` change the updates.
    """
    import jax
    import jax.numpy as jnp
    import numpy as np

    opt = load(name).opt_fn()
    params = {"w": jnp.linspace(-1.0, 1.0, 12).reshape(3, 4), "b": jnp.zeros((4,))}

    @functools.partial(jax.jit, static_argnums=1)
    def run(losses: jax.Array, num_steps: int) -> Any:
        def step(state: Any, i_loss: tuple[jax.Array, jax.Array]) -> tuple[Any, None]:
            i, loss = i_loss
            grads = {k: 0.1 * (i + 1) * jnp.cos(v + i) for k, v in params.items()}
            return opt.update(state, grads, loss=loss), None

        # 6 steps: loss features start after 2 (VeLO's, Celo's); a scan compiles one step.
        steps = (jnp.arange(6, dtype=jnp.float32), losses)
        state, _ = jax.lax.scan(step, opt.init(params, num_steps=num_steps), steps)
        return opt.get_params(state)

    falling = jnp.asarray([2.0 - 0.3 * i for i in range(6)], jnp.float32)
    base = run(falling, 100)

    def differs(other: Any) -> bool:
        # Beyond rounding: a different run length is a different compiled program.
        return any(
            not np.allclose(np.asarray(a), np.asarray(b), rtol=1e-6, atol=1e-9)
            for a, b in zip(
                jax.tree_util.tree_leaves(base), jax.tree_util.tree_leaves(other), strict=True
            )
        )

    # Loss features are scale-free (VeLO's are ratios), so the other losses rise instead.
    return {"loss": differs(run(falling[::-1], 100)), "run_length": differs(run(falling, 10_000))}
