#!/usr/bin/env python3
"""Draws the RSS curves that bench/soak.py --curve wrote (JSON) into one PNG: RSS over minutes, one
line per curve, with the ceiling of the first curve's summary as a dashed line.

    .venv/bin/python bench/soak_plot.py --out docs/soak-minilm.png \
        "before=soak-before.json" "after=soak-after.json"
"""
import argparse
import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after the backend is chosen)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("curves", nargs="+", help="LABEL=curve.json, as bench/soak.py --curve wrote it")
    ap.add_argument("--out", required=True, help="the PNG to write")
    ap.add_argument("--title", default=None)
    args = ap.parse_args()

    fig, ax = plt.subplots(figsize=(8, 4), dpi=110)
    first = None
    for spec in args.curves:
        label, _, path = spec.partition("=")
        if not path:
            ap.error(f"expected LABEL=curve.json, got {spec!r}")
        with open(path) as f:
            curve = json.load(f)
        summary, samples = curve["summary"], curve["samples"]
        first = first or summary
        minutes = [s["seconds"] / 60 for s in samples]
        rss = [s["rss_mib"] for s in samples]
        ax.plot(minutes, rss, linewidth=1, label=f"{label}: {summary['sent']:,} texts, "
                f"slope of the last third {summary['slope_last_third_mib_per_min']:+.1f} MiB/min")
    ax.axhline(first["ceiling_mib"], color="grey", linestyle="--", linewidth=1,
               label=f"ceiling: cache {first['cache_mib']} + model {first['rss_start_mib']:.0f} + "
                     f"margin {first['margin_mib']:.0f} MiB")
    ax.set_xlabel("minutes")
    ax.set_ylabel("server RSS (MiB)")
    ax.set_ylim(bottom=0)
    ax.set_title(args.title or f"headscope serve, {first['model']}: RSS under distinct texts")
    ax.legend(loc="lower right", fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(args.out)
    print(f"soak_plot: wrote {args.out}")


if __name__ == "__main__":
    main()
