"""Plots valid_confidence.py's rows: final training loss against validation loss, and
validation loss against the output matrix's norm, one point per optimizer and seed.

Usage: python plot_valid_confidence.py CSV --out PNG [--task NAME]
"""

import argparse
import csv

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("csv")
    parser.add_argument("--out", required=True)
    parser.add_argument("--task", default="ImageMLP_Mnist5k_28_Relu128")
    args = parser.parse_args()
    with open(args.csv) as f:
        rows = list(csv.DictReader(f))
    names = list(dict.fromkeys(r["optimizer"] for r in rows))
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.8))
    for i, name in enumerate(names):
        mine = [r for r in rows if r["optimizer"] == name]
        learned = name.endswith(".msgpack") or name[0].isupper()
        color = plt.get_cmap("tab20")(i % 20)
        style = dict(marker="o" if learned else "s", color=color, label=name)
        for ax, x in zip(axes, ("final_train", "norm_output"), strict=True):
            ax.scatter([float(r[x]) for r in mine], [float(r["valid_loss"]) for r in mine], **style)
    axes[0].set_xscale("log")
    for ax in axes:
        ax.set_yscale("log")
    axes[0].set_xlabel("final training loss (mean of the last 100 steps)")
    axes[1].set_xlabel("output matrix's Frobenius norm")
    for ax in axes:
        ax.set_ylabel("outer-valid loss (640 images)")
        ax.grid(alpha=0.3)
    axes[1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.suptitle(f"{args.task}, 1000 steps, seeds 0-1: final training against validation loss")
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)


if __name__ == "__main__":
    main()
