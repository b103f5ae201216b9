"""Packages a meta-training run as a ``learnopt.pretrained`` entry (how the shipped ones were made).

::

    learnopt meta-train --lopt MLPLOpt --trainer pes --family ... --out runs/lopt
    learnopt evaluate --theta runs/lopt/theta.msgpack --suite heldout --out runs/lopt-eval
    python examples/make_pretrained.py --run runs/lopt --eval runs/lopt-eval --name NAME \\
        --command "learnopt meta-train ..." --eval-command "learnopt evaluate ..."

writes ``learnopt/pretrained/NAME.msgpack`` (the run's theta with its metadata, the
licence and the commands added) and ``NAME.md`` (provenance and the evaluation's
``summary.md``).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from learnopt.learned_optimizers import theta_files

PRETRAINED = Path(__file__).resolve().parents[1] / "learnopt" / "pretrained"
LICENCE = "Apache-2.0"


def main(argv: list[str] | None = None) -> Path:
    """Writes the entry; returns the path of its theta file."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", required=True, help="the meta-training run's folder")
    parser.add_argument("--eval", required=True, help="'learnopt evaluate' output of its theta")
    parser.add_argument("--name", required=True, help="entry name (file stem)")
    parser.add_argument("--command", required=True, help="the meta-train command line")
    parser.add_argument("--eval-command", required=True, help="the evaluate command line")
    parser.add_argument("--minutes", type=float, required=True, help="meta-training wall time")
    parser.add_argument("--out", default=str(PRETRAINED))
    args = parser.parse_args(argv)

    run, ev, out = Path(args.run), Path(args.eval), Path(args.out)
    trained = theta_files.load(run / "theta.msgpack")
    summary = (ev / "summary.md").read_text()
    meta_training = dict(trained.metadata.get("meta_training") or {})
    meta_training.update(command=args.command, wall_minutes=args.minutes)
    meta_training.pop("out_dir", None)  # a path on the machine that ran it
    description = (
        f"{trained.metadata['architecture']} meta-trained by the command in meta_training "
        f"({args.minutes:.0f} min on a 2-core CPU); evaluated by: {args.eval_command}"
    )
    path = theta_files.save(
        out / f"{args.name}.msgpack",
        trained.lopt,
        trained.theta,
        meta_training=meta_training,
        licence=LICENCE,
        description=description,
    )
    config = json.dumps(trained.metadata.get("config"), sort_keys=True)
    (out / f"{args.name}.md").write_text(
        f"# {args.name}\n\n"
        f"`{trained.metadata['architecture']}({config})`, "
        f"{trained.metadata.get('num_theta')} meta-parameters, licence {LICENCE}.\n\n"
        f"Meta-trained ({args.minutes:.0f} minutes on a 2-core CPU):\n\n"
        f"```bash\n{args.command}\n```\n\n"
        f"Evaluated on the held-out suite against tuned baselines:\n\n"
        f"```bash\n{args.eval_command}\n```\n\n{summary}"
    )
    print(f"wrote {path} ({path.stat().st_size} bytes) and {path.with_suffix('.md')}")
    return path


if __name__ == "__main__":
    main()
