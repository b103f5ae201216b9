"""PES meta-training outer steps per second: the per-element MLP's fast form vs reference.

    python benchmarks/bench_pes_forms.py [--lopt MLPLOpt] [--family MetaTrain_MLP_Digits8_32]
        [--trials 3] [--seconds 6]

Builds the learner of ``learnopt meta-train --lopt LOPT --trainer pes --family FAMILY``
(the recipe's architecture settings and PES settings: truncation length, tasks, std,
outer learning rate) three times in one process: with the learned optimizer's
per-element MLP in the ``"auto"`` form (what runs by default), in the ``"reference"``
form, and with ``LearnableSGD`` in its place (same tasks and PES settings; its update
is a few multiply-adds per parameter, so its step time is the cost of everything but the
learned optimizer: the tasks' forward and backward passes, data, PES itself). Trials
interleave the three; prints the median outer steps per second of each, the process's
CPU time per outer step (all threads; on a shared machine the load moves it less than the
wall time), the compile (first step) seconds, and the breakdown of an outer step's time
into learned-optimizer updates and the rest.
"""

from __future__ import annotations

import argparse
import statistics
import time

import jax

from learnopt import recipes
from learnopt.run import build


def _learner(lopt_name: str, family: str, form: str | None, recipe_lopt: str):
    lopt = build.build_lopt(lopt_name, recipes.lopt_defaults(lopt_name))
    if form is not None:
        lopt.mlp_form = form
    d = recipes.training_defaults(recipe_lopt, "pes")
    return build.build_learner(
        task=family,
        lopt=lopt,
        trainer="pes",
        trunc_length=d["trunc_length"],
        total_length=d["total_length"],
        num_tasks=d["num_tasks"],
        std=d["std"],
        outer_lr=d["outer_lr"],
        max_grad_norm=d["max_grad_norm"],
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lopt", default="MLPLOpt")
    parser.add_argument("--family", default="MetaTrain_MLP_Digits8_32")
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=6.0, help="per trial and variant")
    args = parser.parse_args()

    variants = {
        f"{args.lopt} auto": (args.lopt, "auto"),
        f"{args.lopt} reference": (args.lopt, "reference"),
        "LearnableSGD (no learned-optimizer cost)": ("LearnableSGD", None),
    }
    runs = {}
    for label, (name, form) in variants.items():
        learner = _learner(name, args.family, form, args.lopt)
        state = learner.init(jax.random.PRNGKey(0))
        start = time.perf_counter()
        state, loss, _ = learner.update(state, jax.random.PRNGKey(1))
        jax.block_until_ready(loss)
        runs[label] = [learner, state, jax.random.PRNGKey(2), time.perf_counter() - start, [], []]
        print(f"  {label}: compiled in {runs[label][3]:.1f} s", flush=True)

    for trial in range(args.trials):
        for run in runs.values():
            learner, state, key = run[0], run[1], run[2]
            steps, start, cpu_start = 0, time.perf_counter(), time.process_time()
            while time.perf_counter() - start < args.seconds:
                key, k = jax.random.split(key)
                state, loss, _ = learner.update(state, k)
                steps += 1
            jax.block_until_ready(loss)
            run[1], run[2] = state, key
            run[4].append(steps / (time.perf_counter() - start))
            run[5].append((time.process_time() - cpu_start) / steps)
        print(f"  trial {trial + 1}/{args.trials} done", flush=True)

    print(f"\nPES on {args.family}, {args.lopt} recipe settings; median of {args.trials} trials\n")
    print(
        "| variant | outer steps/s | ms/outer step | CPU ms/outer step | first step (compile) s |"
    )
    print("| --- | ---: | ---: | ---: | ---: |")
    rate = {}
    for label, run in runs.items():
        rate[label] = statistics.median(run[4])
        cpu_ms = 1e3 * statistics.median(run[5])
        print(f"| {label} | {rate[label]:.2f} | {1e3 / rate[label]:.0f} | {cpu_ms:.0f} "
              f"| {run[3]:.1f} |")  # fmt: skip
    fast, ref, rest = (1e3 / r for r in rate.values())
    print(f"\nfast / reference: {rate[f'{args.lopt} auto'] / rate[f'{args.lopt} reference']:.2f}x"
          f" outer steps/s. Breakdown of a reference step: learned-optimizer updates "
          f"~{ref - rest:.0f} ms ({(ref - rest) / ref:.0%}), the rest {rest:.0f} ms; "
          f"of a fast step: updates ~{fast - rest:.0f} ms, the rest {rest:.0f} ms.")  # fmt: skip
    fast, ref, rest = (1e3 * statistics.median(run[5]) for run in runs.values())
    print(f"In CPU time: fast / reference {ref / fast:.2f}x; reference step: updates "
          f"~{ref - rest:.0f} ms ({(ref - rest) / ref:.0%}), the rest {rest:.0f} ms; fast "
          f"step: updates ~{fast - rest:.0f} ms, the rest {rest:.0f} ms.")  # fmt: skip


if __name__ == "__main__":
    main()
