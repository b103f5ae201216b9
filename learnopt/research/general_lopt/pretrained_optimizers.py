"""learned_optimization's pretrained HyperV2 optimizers (VeLO), from checkpoints the user has.

The notes' library publishes the meta-trained weights of VeLO (Metz et al., "VeLO:
Training versatile learned optimizers by scaling up", 2022, arXiv:2211.09760) and of
earlier HyperV2 runs in a public Google Cloud Storage bucket, and its
``research/general_lopt/pretrained_optimizers.py`` names one zero-argument function per
checkpoint. learnopt ships none of these weights and never downloads anything: each
function here takes the path of a local copy instead, as an argument or from an
environment variable::

    from learnopt.research.general_lopt import pretrained_optimizers

    opt = pretrained_optimizers.aug12_continue_on_bigger_2xbs_200kstep_bigproblem_v2_5620(
        checkpoint="velo/params"
    )  # a learnopt Optimizer: opt.init(params, num_steps=T), opt.update(s, g, loss=l)
    trained = pretrained_optimizers.load(checkpoint="velo/params")  # a TrainedLOpt
    tx = trained.as_optax(num_steps=1000)

Where a checkpoint is looked for, first match wins:

1. the ``checkpoint=`` argument: the file, or the folder holding it under the library's
   file name (``params``, or ``<name>.checkpoint`` for the ``no_config`` entries);
2. for VeLO only, the environment variable ``LEARNOPT_VELO_CHECKPOINT``
   (:data:`ENV_VELO_CHECKPOINT`), read the same way;
3. the environment variable ``LEARNOPT_PRETRAINED_LOPTS`` (:data:`ENV_PRETRAINED_LOPTS`):
   a local copy of the bucket's ``pretrained_lopts/`` folder, in its layout
   (``<root>/<name>/params``, ``<root>/no_config/<name>.checkpoint``).

Nothing found raises :class:`CheckpointNotFoundError` (a ``FileNotFoundError``) naming the
file, where the library publishes it (:func:`published_location`) and these three ways
of giving it. A file that is not the checkpoint expected raises
:class:`CheckpointFormatError` (a ``ValueError``) naming the file and what does not match.

The checkpoints are the library's own files, read without conversion: Flax msgpack
(``flax.serialization.to_bytes``) of ``ParameterCheckpoint(params=theta, gen_id, step)``
for the named runs, of a tuple ``(theta, gen_id, step)`` for the ``no_config`` ones, or of
``theta`` alone (what the Celo release's ``velo_4000/theta.state`` holds) (see
:mod:`learnopt.learned_optimizers.convert`). ``theta`` is loaded into
:class:`~learnopt.learned_optimizers.hyper_v2.HyperV2` with the configuration of the run:

* VeLO, :data:`VELO` and its continuation
  ``aug26_aug12_continue_on_bigger_2xbs_200kstep_bigproblem_v2_1397``:
  :data:`VELO_CONFIG`, the ``HyperV2`` bindings of the library's VeLO meta-training
  configurations (``configs/large_scale_phase*.py``: 512 LSTM units, a bank of 256 MLPs,
  the fixed loss features; the LSTM state advances), the same as the Celo release's
  ``velo_4000`` (its ``ff_mult=100.0`` is the library's fixed factor 100). The library
  reads these runs' ``config.gin`` at load time; learnopt does not read gin files.
* the six ``no_config`` baselines: :data:`BASELINE_CONFIG`, the library's (512 LSTM
  units, 256 MLPs, the LSTM state never advances, the original loss features).

The flags ``use_bugged_*`` do not change the shapes of ``theta``, so a checkpoint cannot
tell which ones it was trained with: they come from the configurations above.

The library's other names (:data:`opt_names`) load learned optimizers whose architecture
is in the ``config.gin`` beside each checkpoint; learnopt does not read gin, so they are
not functions here: build the learned optimizer and use
:func:`learnopt.learned_optimizers.convert.load_library_theta`.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported when needed: the module itself stays cheap to import
    from learnopt.learned_optimizers.hyper_v2 import HyperV2
    from learnopt.learned_optimizers.theta_files import TrainedLOpt
    from learnopt.optimizers.interface import Optimizer

__all__ = [
    "PRETRAIN_ROOT",
    "PRETRAIN_ROOT_HTTPS",
    "VELO",
    "VELO_CONFIG",
    "BASELINE_CONFIG",
    "ENV_VELO_CHECKPOINT",
    "ENV_PRETRAINED_LOPTS",
    "CheckpointNotFoundError",
    "CheckpointFormatError",
    "names",
    "published_location",
    "checkpoint_path",
    "hyper_v2_for",
    "load",
    "opt_names",
    "aug12_continue_on_bigger_2xbs_200kstep_bigproblem_v2_5620",
    "aug26_aug12_continue_on_bigger_2xbs_200kstep_bigproblem_v2_1397",
    "aug11_aug4_trunc10per_avg",
    "aug11_aug4_trunc10per_last",
    "sep14_sep10_compare_valid",
    "sep14_sep10_compare2",
    "sep14_sep10_compare2_v2",
    "sep14_aug20run_prior0",
]

#: Where the library publishes its pretrained learned optimizers (a public bucket).
PRETRAIN_ROOT = "gs://gresearch/learned_optimization/pretrained_lopts/"
#: The same folder over HTTPS.
PRETRAIN_ROOT_HTTPS = (
    "https://storage.googleapis.com/gresearch/learned_optimization/pretrained_lopts/"
)

#: VeLO's name in the library (``prefab``'s default optimizer).
VELO = "aug12_continue_on_bigger_2xbs_200kstep_bigproblem_v2_5620"

#: ``HyperV2(**VELO_CONFIG)`` is VeLO's architecture (2,320,385 theta values).
VELO_CONFIG: dict[str, Any] = {
    "lstm_hidden_size": 512,
    "param_inits": 256,
    "use_bugged_loss_features": False,
    "use_bugged_next_lstm_state": False,
}

#: The architecture of the library's ``no_config`` HyperV2 checkpoints.
BASELINE_CONFIG: dict[str, Any] = {
    "lstm_hidden_size": 512,
    "param_inits": 256,
    "use_bugged_loss_features": True,
    "use_bugged_next_lstm_state": True,
}

#: Environment variable: the path of VeLO's checkpoint (the file, or its folder).
ENV_VELO_CHECKPOINT = "LEARNOPT_VELO_CHECKPOINT"
#: Environment variable: a local copy of :data:`PRETRAIN_ROOT`, in its layout.
ENV_PRETRAINED_LOPTS = "LEARNOPT_PRETRAINED_LOPTS"


class CheckpointNotFoundError(FileNotFoundError):
    """A pretrained optimizer's checkpoint is not on this machine (the message says how)."""


class CheckpointFormatError(ValueError):
    """A file given as a pretrained optimizer's checkpoint is not that checkpoint."""


@dataclasses.dataclass(frozen=True)
class _Entry:
    """A checkpoint: its path under :data:`PRETRAIN_ROOT`, architecture and env variable."""

    name: str
    relpath: str
    config: dict[str, Any]
    env_var: str | None = None
    title: str = ""

    @property
    def filename(self) -> str:
        return self.relpath.rsplit("/", 1)[-1]


def _named(name: str, title: str = "", env_var: str | None = None) -> _Entry:
    return _Entry(name, f"{name}/params", VELO_CONFIG, env_var, title)


def _no_config(name: str, filename: str) -> _Entry:
    return _Entry(name, f"no_config/{filename}", BASELINE_CONFIG, None, f"HyperV2 baseline {name}")


_ENTRIES: dict[str, _Entry] = {
    e.name: e
    for e in (
        _named(VELO, "VeLO", ENV_VELO_CHECKPOINT),
        _named(
            "aug26_aug12_continue_on_bigger_2xbs_200kstep_bigproblem_v2_1397",
            "VeLO's continued run",
        ),
        _no_config("aug11_aug4_trunc10per_avg", "aug11_aug4_trunc10per_avg.checkpoint"),
        _no_config("aug11_aug4_trunc10per_last", "aug11_aug4_trunc10per_last.checkpoint"),
        _no_config("sep14_sep10_compare_valid", "sep14_sep10_compare_valid_path.checkpoint"),
        _no_config("sep14_sep10_compare2", "sep14_sep10_compare2.checkpoint"),
        _no_config("sep14_sep10_compare2_v2", "sep14_sep10_compare2_v2.checkpoint"),
        _no_config("sep14_aug20run_prior0", "sep14_aug20run_prior0.checkpoint"),
    )
}


def _entry(name: str) -> _Entry:
    if not isinstance(name, str):
        raise TypeError(f"name must be a string, got {type(name).__name__}")
    if name not in _ENTRIES:
        raise KeyError(
            f"{name!r} is not a pretrained HyperV2 checkpoint learnopt can load; known: "
            f"{', '.join(names())}"
        )
    return _ENTRIES[name]


def names() -> list[str]:
    """The library's pretrained optimizers that this module loads (VeLO first).

    Returns:
      Their names, as the library spells its functions.
    """
    return list(_ENTRIES)


def published_location(name: str = VELO) -> str:
    """Where the library publishes the checkpoint of ``name`` (``gs://`` URL).

    Args:
      name: one of :func:`names` (default :data:`VELO`).

    Returns:
      The ``gs://`` URL of the file; the same path under :data:`PRETRAIN_ROOT_HTTPS` is
      its HTTPS address.
    """
    return PRETRAIN_ROOT + _entry(name).relpath


def _how_to_give(entry: _Entry) -> str:
    gs = PRETRAIN_ROOT + entry.relpath
    https = PRETRAIN_ROOT_HTTPS + entry.relpath
    env = f"the environment variable {entry.env_var}=PATH, or " if entry.env_var else ""
    what = f"{entry.title} ({entry.name})" if entry.title else entry.name
    return (
        f"{what} needs its meta-trained weights, which learnopt neither ships nor "
        f"downloads: the file {entry.filename!r} that learned_optimization publishes at "
        f"{gs} (also {https}). Copy it to this machine and give its path (the file, or "
        f"the folder holding it as {entry.filename!r}) as checkpoint=PATH (e.g. "
        f"prefab.optax_lopt(num_steps, checkpoint=PATH)), {env}"
        f"{ENV_PRETRAINED_LOPTS}=a local copy of {PRETRAIN_ROOT} in its layout."
    )


def _in_folder(path: Path, entry: _Entry) -> Path:
    return path / entry.filename if path.is_dir() else path


def checkpoint_path(name: str = VELO, checkpoint: str | os.PathLike | None = None) -> Path:
    """The local file of ``name``'s checkpoint (see the module docstring for the order).

    Args:
      name: one of :func:`names` (default :data:`VELO`).
      checkpoint: the file or its folder; None looks in the environment variables.

    Returns:
      The path of an existing file.

    Raises:
      CheckpointNotFoundError: no file there (or nothing given); the message names the
        file needed, where the library publishes it and how to give it.
    """
    entry = _entry(name)
    if checkpoint is not None:
        source, raw = "checkpoint=", os.fspath(checkpoint)
    elif entry.env_var and os.environ.get(entry.env_var):
        source, raw = f"${entry.env_var}", os.environ[entry.env_var]
    elif os.environ.get(ENV_PRETRAINED_LOPTS):
        root = Path(os.environ[ENV_PRETRAINED_LOPTS]).expanduser()
        source, raw = f"${ENV_PRETRAINED_LOPTS}", os.fspath(root / entry.relpath)
    else:
        raise CheckpointNotFoundError(_how_to_give(entry))
    if "://" in str(raw):
        raise CheckpointNotFoundError(
            f"{raw} (from {source}) is a remote address; learnopt reads local files only. "
            + _how_to_give(entry)
        )
    path = _in_folder(Path(raw).expanduser(), entry)
    if not path.is_file():
        raise CheckpointNotFoundError(f"no file at {path} (from {source}). {_how_to_give(entry)}")
    return path


def hyper_v2_for(name: str = VELO) -> HyperV2:
    """The learned optimizer ``name`` was meta-trained as (its theta's architecture).

    Args:
      name: one of :func:`names` (default :data:`VELO`).

    Returns:
      ``HyperV2(**VELO_CONFIG)`` for VeLO and its continuation, ``HyperV2(**BASELINE_CONFIG)``
      for the ``no_config`` baselines.
    """
    from learnopt.learned_optimizers.hyper_v2 import HyperV2

    return HyperV2(**_entry(name).config)


def _describe(config: dict[str, Any]) -> str:
    return f"HyperV2({', '.join(f'{k}={v!r}' for k, v in config.items())})"


def _differences(got: Any, expected: dict[str, Any], limit: int = 4) -> str:
    """What differs between a restored theta state dict and the expected one ("" if none)."""
    import jax
    import numpy as np

    if not isinstance(got, Mapping):
        return f"it holds a {type(got).__name__} where a dict theta was expected"

    def shapes(tree: Any) -> dict[str, tuple[int, ...]]:
        leaves = jax.tree_util.tree_flatten_with_path(tree)[0]
        return {jax.tree_util.keystr(k): tuple(np.shape(v)) for k, v in leaves}

    have, want = shapes(got), shapes(expected)

    def listed(items: list[str]) -> str:
        more = f" and {len(items) - limit} more" if len(items) > limit else ""
        return ", ".join(items[:limit]) + more

    missing = sorted(set(want) - set(have))
    extra = sorted(set(have) - set(want))
    wrong = [
        f"{k} {list(have[k])} (expected {list(want[k])})"
        for k in sorted(want)
        if k in have and have[k] != want[k]
    ]
    parts = []
    if missing:
        parts.append(f"missing {listed(missing)}")
    if extra:
        parts.append(f"unexpected {listed(extra)}")
    if wrong:
        parts.append(f"wrong shape {listed(wrong)}")
    return "; ".join(parts)


def load(name: str = VELO, checkpoint: str | os.PathLike | None = None) -> TrainedLOpt:
    """Reads ``name``'s checkpoint into its ``HyperV2``: the learned optimizer and its theta.

    Args:
      name: one of :func:`names` (default :data:`VELO`, VeLO).
      checkpoint: the checkpoint file or its folder; None: the environment variables
        (module docstring).

    Returns:
      A :class:`~learnopt.learned_optimizers.theta_files.TrainedLOpt`: ``.lopt`` the
      ``HyperV2``, ``.theta`` the weights (float32), ``.opt_fn()`` the optimizer,
      ``.as_optax(num_steps=T)`` its optax form; ``.metadata`` records the source.

    Raises:
      CheckpointNotFoundError: no checkpoint file (the message says how to give one).
      CheckpointFormatError: the file is not a Flax msgpack checkpoint of that
        architecture (the message names the file and the entries that differ).
    """
    import flax.serialization
    import jax

    from learnopt.learned_optimizers import convert, theta_files

    entry = _entry(name)
    path = checkpoint_path(name, checkpoint)
    lopt = hyper_v2_for(name)
    expected_file = f"expected the file {entry.filename!r} published at {published_location(name)}"
    try:
        state = flax.serialization.msgpack_restore(path.read_bytes())
    except Exception as e:  # msgpack raises several unrelated classes on bad bytes
        why = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
        raise CheckpointFormatError(
            f"{path} is not a Flax msgpack checkpoint ({why}); {expected_file}"
        ) from None
    theta_state = convert.unwrap_checkpoint(state)
    expected = flax.serialization.to_state_dict(jax.eval_shape(lopt.init, jax.random.PRNGKey(0)))
    differences = _differences(theta_state, expected)
    if differences:
        raise CheckpointFormatError(
            f"the theta in {path} does not fit {entry.name}'s {_describe(entry.config)}: "
            f"{differences}; {expected_file} (a learned_optimization checkpoint of that HyperV2)"
        )
    try:
        theta = convert.theta_from_library(theta_state, lopt)
    except (TypeError, ValueError) as e:
        raise CheckpointFormatError(f"{path}: {e}; {expected_file}") from None
    metadata = {
        "architecture": "HyperV2",
        "config": dict(entry.config),
        "source": {"library": "learned_optimization", "name": entry.name},
        "published_at": published_location(name),
        "paper": "Metz et al., VeLO, arXiv:2211.09760 (2022)",
    }
    return theta_files.TrainedLOpt(lopt=lopt, theta=theta, metadata=metadata, path=path)


def _optimizer_fn(name: str) -> Callable[..., Optimizer]:
    entry = _ENTRIES[name]

    def fn(checkpoint: str | os.PathLike | None = None) -> Optimizer:
        return load(name, checkpoint).opt_fn()

    what = f"{entry.title}: " if entry.title else ""
    fn.__name__ = fn.__qualname__ = name
    fn.__module__ = __name__
    fn.__doc__ = f"""{what}the library's pretrained optimizer ``{name}``, from a local checkpoint.

    Args:
      checkpoint: the file {entry.filename!r} (published at ``{PRETRAIN_ROOT + entry.relpath}``)
        or its folder; None looks in the environment variables (module docstring).

    Returns:
      The learnopt optimizer (``init(params, num_steps=T)``, ``update(state, grads,
      loss=loss)``); its ``.lopt`` is the ``HyperV2`` and ``.theta`` the weights.

    Raises:
      CheckpointNotFoundError: no checkpoint file (the message says how to give one).
      CheckpointFormatError: the file is not that checkpoint.
    """
    return fn


aug12_continue_on_bigger_2xbs_200kstep_bigproblem_v2_5620 = _optimizer_fn(VELO)
aug26_aug12_continue_on_bigger_2xbs_200kstep_bigproblem_v2_1397 = _optimizer_fn(
    "aug26_aug12_continue_on_bigger_2xbs_200kstep_bigproblem_v2_1397"
)
aug11_aug4_trunc10per_avg = _optimizer_fn("aug11_aug4_trunc10per_avg")
aug11_aug4_trunc10per_last = _optimizer_fn("aug11_aug4_trunc10per_last")
sep14_sep10_compare_valid = _optimizer_fn("sep14_sep10_compare_valid")
sep14_sep10_compare2 = _optimizer_fn("sep14_sep10_compare2")
sep14_sep10_compare2_v2 = _optimizer_fn("sep14_sep10_compare2_v2")
sep14_aug20run_prior0 = _optimizer_fn("sep14_aug20run_prior0")

#: The library's list of its configured pretrained optimizers (``<name>/params`` with a
#: ``config.gin``), as it spells them.
opt_names = [
    "march20_2022_march18_parametric_v4_dz",
    "march20_2022_march18_parametric_tg_7class_676",
    "march20_2022_march20_parametric_sm_275",
    "march23_2022_march20_parametric_sm_3931",
    "march30_2022_march27_parametric_v3_2998",
    "march31_2022_march27_parametric_v3_3917",
    "april4_2022_april1_bigcluster_v3_4448",
    "april5_2022_april1_bigcluster_v3_5363",
    "april7_2022_april1_bigcluster_v3_8291",
    "april17_2022_april1_bigcluster_v3_12801",
    "april22_2022_april21_bigcluster_lossclip_1016",
    "april22_2022_april21_bigcluster_lossclip_2992",
    "april22_2022_april21_bigcluster_lossclip_1260",
    "april22_2022_april21_bigcluster_lossclip_1861",
    "april22_2022_april21_bigcluster_lossclip_1859",
    "april22_2022_april21_bigcluster_lossclip_1858",
    "april22_2022_april21_bigcluster_lossclip_1857",
    "april22_2022_april21_bigcluster_lossclip_1860_seed2",
    "april24_2022_april23_bigcluster_renormalize2_583",
    "april24_2022_march27_parametric_v3_29584",
    "april22_2022_april21_bigcluster_lossclip_1860",
    "april15_2022_april1_smallcluster_v3_17819",
    "may3_2022_april28_clusterv2_5787",
    "may3_2022_april28_clusterv2_5371",
    "may27_2022_may9_bigcluster_8rep_10529",
    "may27_2022_may9_bigcluster_8rep_9931",
    "may27_2022_may9_bigcluster_8rep_10147",
    "may27_2022_may9_bigcluster_8rep_17012",
    "may27_2022_may9_bigcluster_8rep_17010",
    "may27_2022_may9_bigcluster_8rep_17015",
    "jun11_jun10_16x4_speedconfirm_rb_983",
    "may27_2022_jamesnomop__best_arch2__wd0.0_bbnormFalse_stepmult0_nomstep0.001_rep0",
    "may27_2022_jamesnomop__best_arch2__wd0.0_bbnormFalse_stepmult0_nomstep0.001_rep1",
    "may27_2022_jamesnomop__best_arch2__wd0.0_bbnormFalse_stepmult0.001_nomstep0.0_rep0",
    "may27_2022_jamesnomop__best_arch2__wd0.0_bbnormFalse_stepmult0.001_nomstep0.0_rep1",
    "may27_2022_jamesnomop__best_arch2__wd0.0_bbnormTrue_stepmult0.001_nomstep0.001_rep0",
    "may27_2022_jamesnomop__best_arch2__wd0.0_bbnormTrue_stepmult0.001_nomstep0.001_rep1",
    "may27_2022_jamesnomop__best_arch2__wd1.0_bbnormTrue_stepmult0.001_nomstep0.001_rep0",
    "may27_2022_jamesnomop__best_arch2__wd1.0_bbnormTrue_stepmult0.001_nomstep0.001_rep1",
    "may27_2022_jamesnomop__best_arch2__wd0.1_bbnormTrue_stepmult0.001_nomstep0.001_rep0",
    "may27_2022_jamesnomop__best_arch2__wd0.1_bbnormTrue_stepmult0.001_nomstep0.001_rep1",
    "may27_2022_jamesnomop__best_arch2__wd0.5_bbnormTrue_stepmult0.001_nomstep0.001_rep0",
    "may27_2022_jamesnomop__best_arch2__wd0.5_bbnormTrue_stepmult0.001_nomstep0.001_rep1",
    "may27_2022_smallscaletransfer_may8_smallscale_hyperlstm_fulles_sign_es__lr0.001_rep0__eval_all_params_1616",
    "may27_2022_smallscaletransfer_may8_smallscale_hyperlstm_fulles_sign_es__lr0.001_rep1__eval_all_params_1600",
    "may27_2022_smallscaletransfer_may8_smallscale_hyperlstm_sharednoise__lr3e-05_rep0__eval_all_params_1000",
    "may27_2022_smallscaletransfer_may13_nnadam__lr0.0001_rep2__eval_all_params_4013",
    "may27_2022_smallscaletransfer_may22_nominal_rmsprecondition_evel_smallerstep__lr3e-05_rep0__eval_all_params_1000",
    "may27_2022_smallscaletransfer_may13_nominal_hyperv2_adam3e4_v2__lr3e-05_rep1__eval_all_params_1000",
    "may27_2022_smallscaletransfer_may13_nominal_hyperv2_nnadam__lr3e-05_rep0__eval_all_params_1000",
    "may27_2022_smallscaletransfer_may13_nominal_hyperv2_nnadam__lr3e-05_rep1__eval_all_params_1000",
    "may27_2022_smallscaletransfer_may22_nominal_weightdecay__lr3e-05_rep0__eval_all_params_1000",
    "jun29_vlcluster_shortlength_pretrain_extend_1109",
    "jun29_vlcluster_shortlength_pretrain_extend_1150",
    "jun29_vlcluster_shortlength_pretrain_extend_1409",
    "jun29_vlcluster_shortlength_pretrain_extend_1605",
    "jun28_bigcluster_8rep_jf_biggerdatafinetune_812",
    "jun28_bigcluster_8rep_jf_biggerdatafinetune_3015",
    "jun28_bigcluster_8rep_jf_biggerdatafinetune_6941",
    "aug1_jul18_continue_on_bigger_2753",
    "aug1_jul18_continue_on_bigger_2xbs_morestale_5031",
    "aug1_jul18_continue_on_bigger_2xbs_morestale_5064",
    "aug1_jul18_continue_on_bigger_2xbs_morestale_3784",
    "aug1_jul18_continue_on_bigger_2xbs_morestale_3858",
    "aug1_jul18_continue_on_bigger_2xbs_morestale_7442",
    "aug1_jul18_continue_on_bigger_smallerlr_534",
    "aug1_jul18_continue_on_bigger_smallerlr_1265",
    "aug1_jul18_continue_on_bigger_2801",
    "aug1_jul18_continue_on_bigger_8814",
    "aug1_may9_bigcluster_8rep_17048",
    "aug5_aug2_continue_on_bigger_2xbs_200kstep_106",
    "aug5_aug2_continue_on_bigger_2xbs_200kstep_2363",
    "aug5_aug2_continue_on_bigger_2xbs_200kstep_8814",
    "jun26_bigcluster_8rep_jf_1e3lr_2906",
    "jul18_continue_on_bigger_2xbs_morestale_9264",
    VELO,
    "aug26_aug12_continue_on_bigger_2xbs_200kstep_bigproblem_v2_1397",
]

_GIN_ONLY = {n.replace(".", "_").replace("-", "_"): n for n in opt_names if n not in _ENTRIES}


def __getattr__(attr: str) -> Any:
    """Explains the library's names that learnopt cannot load without their ``config.gin``."""
    if attr in _GIN_ONLY:
        folder = PRETRAIN_ROOT + _GIN_ONLY[attr] + "/"
        raise AttributeError(
            f"{attr} is one of learned_optimization's pretrained optimizers whose "
            f"architecture is given by the config.gin beside its checkpoint ({folder}); "
            "learnopt does not read gin. Build that learned optimizer with the config's "
            "arguments and load the local copy of its 'params' with "
            "learnopt.learned_optimizers.convert.load_library_theta(path, lopt). Loadable "
            f"here: {', '.join(names())}"
        )
    raise AttributeError(f"module {__name__!r} has no attribute {attr!r}")
