#!/usr/bin/env python3
"""The plots of docs/results.md, as PNG, from speed.py's JSON and from `dtr plan`.

    $(bash bench/pytorch/venv.sh) bench/pytorch/plots.py --speed SPEED.json --dtr DTR \
        [--out docs/img]

Writes:
  time_vs_size.png   redistribution time vs tensor size, dtr and PyTorch, per transition
  planning_time.png  planning time vs mesh dims (the rotations), dtr and PyTorch
  plan_bytes.png     bytes the busiest rank receives: compat vs optimal plans vs the lower
                     bound (`dtr plan --compare --json`), 64 MiB tensors
and plan_bytes.json with the figures plotted.
"""

import argparse
import json
import os
import subprocess

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

# Changes whose compat and optimal plans differ, and some where they do not; 64 MiB f32.
BYTES_CASES = [
    ("S(0) -> S(1)", "8", "S(0)", "S(1)"),
    ("S(0),S(1) -> S(1),S(0)", "2x4", "S(0),S(1)", "S(1),S(0)"),
    ("S(0),S(0) -> R,S(1)", "2x4", "S(0),S(0)", "R,S(1)"),
    ("S(0),S(0) -> S(1),S(1)", "2x4", "S(0),S(0)", "S(1),S(1)"),
    ("S(0),S(0) -> R,S(0)", "2x4", "S(0),S(0)", "R,S(0)"),
    ("S(1),S(0),S(2) -> S(0),S(2),S(1)", "2x2x2", "S(1),S(0),S(2)", "S(0),S(2),S(1)",
     "256x256x256"),
    ("P,S(0) -> S(1),R", "2x4", "P,S(0)", "S(1),R"),
    ("S(0) -> R", "8", "S(0)", "R"),
    ("P -> S(0)", "8", "P", "S(0)"),
]


def plot_time_vs_size(speed, out):
    names = list(dict.fromkeys(r["transition"] for r in speed["speed"]))
    fig, axes = plt.subplots(2, 3, figsize=(13, 7.5), sharex=True)
    for ax, name in zip(axes.flat, names):
        rows = sorted((r for r in speed["speed"] if r["transition"] == name),
                      key=lambda r: r["mib"])
        mib = [r["mib"] for r in rows]
        ax.plot(mib, [r["dtr_us"] / 1e3 for r in rows], "o-", color="tab:blue",
                label="dtr (Open MPI)")
        ax.plot(mib, [r["dtr_baseline_us"] / 1e3 for r in rows], ":", color="tab:blue",
                alpha=0.7, label="dtr's collectives alone")
        ax.plot(mib, [r["torch_us"] / 1e3 for r in rows], "s-", color="tab:orange",
                label="PyTorch DTensor (gloo)")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_title(f"{name}  (mesh {rows[0]['mesh']})", fontsize=10)
        ax.set_xticks(mib)
        ax.set_xticklabels([str(m) for m in mib])
        ax.grid(True, which="both", alpha=0.3)
    for ax in axes[1]:
        ax.set_xlabel("tensor size (MiB, f32)")
    for ax in axes[:, 0]:
        ax.set_ylabel("time per redistribution (ms)")
    axes[0, 0].legend(fontsize=9, loc="upper left")
    fig.suptitle(f"Redistribution time on 4 CPU ranks (median of the slowest rank; "
                 f"torch {speed['torch']}, {speed['date']})", fontsize=11)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "time_vs_size.png"), dpi=110)
    plt.close(fig)


def plot_planning(speed, out):
    rows = [r for r in speed["planning"] if r["change"].startswith("rotate")]
    dims = [int(r["change"].split()[1].split("-")[0]) for r in rows]
    fig, ax = plt.subplots(figsize=(7.5, 5))
    series = [("dtr_optimal_us", "dtr optimal", "o-", "tab:blue"),
              ("dtr_compat_us", "dtr compat", "o--", "tab:cyan"),
              ("dtr_cached_us", "dtr cache hit", "o:", "tab:gray"),
              ("torch_greedy_us", "PyTorch greedy (default)", "s-", "tab:orange"),
              ("torch_graph_us", "PyTorch graph (min-cost)", "s--", "tab:red"),
              ("torch_cached_us", "PyTorch cache hit", "s:", "tab:brown")]
    for key, label, style, color in series:
        ax.plot(dims, [r[key] for r in rows], style, color=color, label=label)
    ax.set_yscale("log")
    ax.set_xticks(dims)
    ax.set_xticklabels([f"{d}-d\n({2 ** d} ranks)" for d in dims])
    ax.set_xlabel("mesh dims (each of size 2); change S(i%3) -> S((i+1)%3) on every dim")
    ax.set_ylabel("planning time (microseconds, median)")
    ax.set_title("Planning time: dtr vs PyTorch DTensor's planner")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=9)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "planning_time.png"), dpi=110)
    plt.close(fig)


def plan_bytes(dtr):
    rows = []
    for name, mesh, a, b, *shape in BYTES_CASES:
        cmd = [dtr, "plan", "--mesh", mesh, "--shape", (shape or ["16384x1024"])[0], "--from",
               a, "--to", b,
               "--compare", "--json"]
        j = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)
        rows.append({"change": name, "mesh": mesh,
                     "compat": j["compat"]["recv_bytes_per_rank_max"],
                     "optimal": j["optimal"]["recv_bytes_per_rank_max"],
                     "lower_bound": j["optimal"]["lower_bound_recv_bytes_per_rank"],
                     "compat_peak": j["compat"]["peak_extra_bytes_per_rank"],
                     "optimal_peak": j["optimal"]["peak_extra_bytes_per_rank"]})
    return rows


def plot_bytes(rows, out):
    fig, ax = plt.subplots(figsize=(11, 5.5))
    x = range(len(rows))
    w = 0.27
    mib = 1 << 20
    ax.bar([i - w for i in x], [r["compat"] / mib for r in rows], w, color="tab:orange",
           label="compat (the seed algorithm)")
    ax.bar(list(x), [r["optimal"] / mib for r in rows], w, color="tab:blue",
           label="optimal (dtr's default)")
    ax.bar([i + w for i in x], [r["lower_bound"] / mib for r in rows], w, color="tab:green",
           label="lower bound")
    ax.set_xticks(list(x))
    ax.set_xticklabels([f"{r['change']}\n(mesh {r['mesh']})" for r in rows], rotation=30,
                       ha="right", fontsize=8)
    ax.set_ylabel("MiB received by the busiest rank")
    ax.set_title("Bytes moved: compat vs optimal plans, 64 MiB f32 tensors "
                 "(16384x1024; 3-d: 256x256x256)")
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=9)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "plan_bytes.png"), dpi=110)
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--speed", required=True, help="speed.py's --json output")
    ap.add_argument("--dtr", required=True, help="the dtr binary (for `dtr plan`)")
    ap.add_argument("--out", default="docs/img")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    speed = json.load(open(args.speed))
    if speed["speed"]:
        plot_time_vs_size(speed, args.out)
    plot_planning(speed, args.out)
    rows = plan_bytes(args.dtr)
    plot_bytes(rows, args.out)
    with open(os.path.join(args.out, "plan_bytes.json"), "w") as f:
        json.dump(rows, f, indent=1)
    for r in rows:
        print(f"{r['change']:34s} {r['mesh']:6s} compat {r['compat'] / 2**20:7.2f} MiB, "
              f"optimal {r['optimal'] / 2**20:7.2f} MiB, bound {r['lower_bound'] / 2**20:7.2f}"
              f" MiB; peak extra {r['compat_peak'] / 2**20:.1f} vs "
              f"{r['optimal_peak'] / 2**20:.1f} MiB")


if __name__ == "__main__":
    main()
