#!/usr/bin/env python3
"""docs/results.md from the raw figures of one `bash bench/results.sh` run (docs/results/).

    python3 bench/results_page.py --data docs/results --out docs/results.md

The Python standard library alone: tests/tools/results_page_test.sh runs it on the committed
files and compares its page with the committed one, so every figure on the page is one the
run printed. Every sentence that states a figure computes it here from those files.
"""

import argparse
import json
import os
import re
import textwrap

STEPS = ["conformance", "speed", "dtensor", "plan", "limit", "cross_mesh", "checkpoint", "grad"]


# ---- reading the benchmarks' outputs ----------------------------------------------------

def md_tables(text):
    """The Markdown tables in text: a list of (header, rows), cells stripped."""
    out, cur = [], None
    for line in text.splitlines():
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if cur is None:
                cur = (cells, [])
                out.append(cur)
            elif not all(re.fullmatch(r":?-+:?", c) for c in cells):
                cur[1].append(cells)
        else:
            cur = None
    return out


def table_lines(text):
    """The lines of text's tables, as they are (the page shows them unchanged)."""
    return "\n".join(l for l in text.splitlines() if l.startswith("|"))


def num(cell):
    """A table cell's number (1,234.5 / 1.2x / **3.4**), or None for '-' and text."""
    m = re.fullmatch(r"\**\s*([-+]?[0-9][0-9,]*\.?[0-9]*)\s*x?\s*\**", cell or "")
    return float(m.group(1).replace(",", "")) if m else None


def rows_of(text, table=0):
    """Table number `table` of text as dicts keyed by its header."""
    tabs = md_tables(text)
    if len(tabs) <= table:
        return []
    head, rows = tabs[table]
    return [dict(zip(head, r)) for r in rows]


def plan_bench_rows(text):
    """plan_bench's columns (change dims ranks optimal compat cached candidate steps)."""
    rows = []
    for line in text.splitlines():
        f = line.split()
        if len(f) == 8 and f[1].isdigit() and f[2].isdigit():
            rows.append({"change": f[0], "dims": int(f[1]), "ranks": int(f[2]),
                         "optimal": float(f[3]), "compat": float(f[4]), "cached": float(f[5]),
                         "candidate": f[6], "steps": int(f[7])})
    return rows


def span(values, fmt="{:.2f}", unit="x"):
    vals = sorted(v for v in values if v is not None)
    if not vals:
        return "-"
    lo, hi = fmt.format(vals[0]), fmt.format(vals[-1])
    return f"{lo}{unit}" if lo == hi else f"{lo}-{hi}{unit}"


def duration(secs):
    m, s = divmod(int(secs), 60)
    h, m = divmod(m, 60)
    return f"{h} h {m:02d} min" if h else f"{m} min {s:02d} s"


def thousands(x, digits=1):
    return f"{x:,.{digits}f}"


# ---- the sections -----------------------------------------------------------------------

def header(run):
    m, sw = run["machine"], run["software"]
    impi = f"Intel MPI {sw['intel_mpi']}" if sw.get("intel_mpi") else "no Intel MPI"
    out = [
        "# Results: dtr beside what users pick instead",
        "",
        "<!-- Written by bench/results_page.py from docs/results/ (bash bench/results.sh);",
        "     edit the script, not this page: tests/tools/results_page_test.sh compares them. -->",
        "",
        f"Measured on {run['date']} by `bash bench/results.sh`, which ran every benchmark below "
        f"in {duration(run['total_seconds'])} on this machine and wrote this page, its plots and "
        f"the raw figures (docs/results/). Machine: {m['cpu']}, {m['cores']} cores, "
        f"{m['memory_gib']} GiB, {m['os']} (Linux {m['kernel']}); Open MPI {sw['open_mpi']} "
        f"over shared memory, {impi}, PyTorch {sw['torch']} from PyPI on CPU (gloo).",
    ]
    if run.get("quick"):
        out += ["", "**A `--quick` run: every step at its smallest size; not figures to quote.**"]
    out += [
        "",
        f"With {m['cores']} cores, the {m['cores']}-rank figures have a core per rank; more ranks "
        "share the cores, so their times measure the scheduler as well. Every comparison is side by side in one "
        "run, and every dtr result in it is checked (`--verify`, or byte for byte against the "
        "other side).",
        "",
        "| step | command | seconds | date | commit |",
        "|---|---|---:|---|---|",
    ]
    for name in STEPS:
        s = run["steps"].get(name)
        if s:
            quick = " (--quick)" if s.get("quick") else ""
            out.append(f"| {name} | `{s['command']}`{quick} | {s['seconds']} | {s['date']} | "
                       f"{s.get('commit', '?')[:7]} |")
    return out


def conformance(c, cmd):
    counts = c["counts"]
    st = c["stats"]
    unexplained = len(c["disagreements"])
    out = ["## Conformance with PyTorch DTensor", "",
           f"`{cmd}`: {c['cases']:,} random cases, {c['directions']:,} directions (each case "
           f"A -> B and B -> A), torch {c['torch']}. Each direction compares dtr's layouts, "
           f"results and gradients with DTensor's on every rank; how the cases are drawn and "
           f"what each known difference is: [conformance.md](conformance.md).", "",
           "| outcome | directions |", "|---|---:|"]
    for key in sorted(counts, key=lambda k: (k != "compared", k != "both-refused", k)):
        label = {"compared": "both ran; layouts, results and gradients agree",
                 "both-refused": "both refused"}.get(key, f"known difference `{key[6:]}`"
                                                    if key.startswith("known:") else key)
        out.append(f"| {label} | {counts[key]:,} |")
    out += [f"| **unexplained disagreements** | **{unexplained}** |",
            f"| total | {c['directions']:,} |", "",
            f"Compared: layouts of {st['layouts']:,} rank-specs, {st['fwd_elems']:,} result "
            f"elements, {st['grad_elems']:,} gradient elements ({st['grads_compared']:,} "
            f"directions with a gradient)."]
    return out


def speed(s, cmd, dtensor_md, dtensor_cmd, date, dtensor_date):
    out = ["## Speed beside PyTorch DTensor", "",
           f"`{cmd}` ({date}): `dtr run` (Open MPI) against `DTensor.redistribute` (gloo) on 4 ranks, f32 "
           f"tensors of (256 x MiB) x 1024; 1-d changes on a mesh of 4, 2-d ones on 2x2. Per "
           f"round, each library's figure is the median over its iterations of the slowest "
           f"rank's time; rounds alternate the two, and the table gives the median of the "
           f"rounds. ratio = PyTorch / dtr (above 1 dtr is faster). \"collectives alone\": "
           f"the same plan's collectives on contiguous buffers (`dtr run`'s baseline).", "",
           "| transition | mesh | MiB | dtr us | dtr's collectives alone us | PyTorch us | "
           "PyTorch / dtr | dtr collectives | PyTorch collectives |",
           "|---|---|---:|---:|---:|---:|---:|---|---|"]
    for r in sorted(s["speed"], key=lambda r: r["mib"]):
        out.append(f"| {r['transition']} | {r['mesh']} | {r['mib']} | {thousands(r['dtr_us'])} | "
                   f"{thousands(r['dtr_baseline_us'])} | {thousands(r['torch_us'])} | "
                   f"**{r['ratio']:.2f}** | {r['dtr_collectives']} | {r['torch_collectives']} |")
    out += ["", "![time vs size](results/time_vs_size.png)", "",
            "Where the gap comes from: at small sizes the engine (gloo over TCP loopback has a "
            "floor of milliseconds per call here, Open MPI's shared memory a fraction of one); "
            "at every size, for S(0) -> S(1) and the two 2-d changes, the plan (DTensor on CPU "
            "has no all-to-all and gathers the whole tensor on every rank: n times the bytes "
            "of dtr's all-to-all or exchange, see the collectives columns); where both issue "
            "the same single collective (S(0) -> R, P -> R, P -> S(0)), the engines' collective "
            "speed. The ranks share the cores, so single figures move 10-30% between runs; the "
            "ratios, side by side in one run, move less.", "",
            f"From Python, `dtr.torch.redistribute` against `DTensor.redistribute` under torchrun "
            f"(`{dtensor_cmd}`, {dtensor_date}; DTensors in and out, docs/python.md): on dtr's "
            f"Gloo backend (through shared memory inside a node) and on the torch engine (dtr's "
            f"plan run through torch's own process group and collectives).", "",
            table_lines(dtensor_md)]
    return out


def planning(s, plan_md, plan_cmd):
    out = ["## Planning time", "",
           "From the speed step's run (speed.json): dtr's planners (`dtr_plan_create`, optimal and compat; `dtr_plan_cache_get` on a "
           "warm cache) against PyTorch's (`_gen_transform_infos_non_cached` with the greedy "
           "planner, its default, and the graph-based min-cost search it uses for shard orders; "
           "the `functools.cache` hit), for the same specs, in one process each, medians "
           "(microseconds):", "",
           "| change | mesh | dtr optimal | dtr compat | dtr cache hit | PyTorch greedy | "
           "PyTorch graph | PyTorch cache hit | greedy / dtr optimal | graph / dtr optimal |",
           "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in s["planning"]:
        g, gr, o = r["torch_greedy_us"], r["torch_graph_us"], r["dtr_optimal_us"]
        out.append(f"| {r['change']} | {r['mesh']} | {o:.2f} | {r['dtr_compat_us']:.2f} | "
                   f"{r['dtr_cached_us']:.2f} | {thousands(g)} | {thousands(gr)} | "
                   f"{r['torch_cached_us']:.2f} | {g / o:.1f} | {gr / o:,.0f} |")
    rows = plan_bench_rows(plan_md)
    out += ["", "![planning time](results/planning_time.png)", "",
            f"dtr's planning time against the number of ranks (`{plan_cmd}`: meshes of 1 to 8 "
            f"dims of size 2, 2 to 256 ranks, a 4096x4096x1024 f32 tensor; medians, "
            f"microseconds; \"candidate\" is the plan the optimal planner kept):", "",
            "| change | mesh dims | ranks | optimal | compat | cache hit | candidate | steps |",
            "|---|---:|---:|---:|---:|---:|---|---:|"]
    for r in rows:
        out.append(f"| {r['change']} | {r['dims']} | {r['ranks']} | {r['optimal']:.2f} | "
                   f"{r['compat']:.2f} | {r['cached']:.2f} | {r['candidate']} | {r['steps']} |")
    out += ["", "![planning time vs ranks](results/planning_ranks.png)"]
    return out


def plan_bytes(rows):
    mib = 1 << 20
    out = ["## Bytes moved: the seed algorithm against the optimal plan", "",
           "The busiest rank's received bytes for 64 MiB tensors, from `dtr plan --compare "
           "--json` (run by bench/results_plots.py into docs/results/plan_bytes.json): the seed algorithm (`compat`, what "
           "DTensor's greedy planner derives from) against dtr's default and the lower bound.",
           "", "| change | mesh | compat MiB | optimal MiB | lower bound MiB | compat peak extra "
           "MiB | optimal peak extra MiB |", "|---|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        out.append(f"| {r['change']} | {r['mesh']} | {r['compat'] / mib:.1f} | "
                   f"{r['optimal'] / mib:.1f} | {r['lower_bound'] / mib:.1f} | "
                   f"{r['compat_peak'] / mib:.1f} | {r['optimal_peak'] / mib:.1f} |")
    out += ["", "![bytes moved](results/plan_bytes.png)"]
    return out


def section(title, text, step, intro, png, alt):
    out = [f"## {title}", "", f"`{step['command']}` ({step['date']}). {intro}", "",
           table_lines(text)]
    if png:
        out += ["", f"![{alt}](results/{png})"]
    return out


# ---- headlines and the rows where dtr is not ahead ---------------------------------------

# The columns each benchmark's table must have (the page reads them by name).
COLUMNS = {
    "dtensor": ["change", "DTensor.redistribute, ms", "dtr.torch.redistribute (dtr's Gloo), ms",
                "dtr faster", "dtr.torch.redistribute (torch engine), ms"],
    "limit": ["ranks", "dtype", "transition", "MiB", "dtr us", "dtr / limit", "Open MPI us",
              "Intel MPI us"],
    "cross_mesh": ["ranks", "change", "list", "gather / batch", "batch / limit"],
    "checkpoint": ["ranks", "page cache", "way", "seconds", "of its limit", "dtr faster by"],
    "grad": ["model", "ranks", "mode", "dtype", "PyTorch / grouped", "grouped / bare"],
}


def table(d, name):
    """The one table of benchmark `name`'s output as dicts, its columns checked: a second
    table (a stray line inside the first) or a missing column is an error naming them."""
    tabs = md_tables(d[name])
    if len(tabs) != 1:
        raise SystemExit(f"results_page.py: {name}.md: {len(tabs)} tables where one was "
                         f"expected (a line that is not a table row inside it?)")
    head, rows = tabs[0]
    missing = [c for c in COLUMNS[name] if c not in head]
    if missing:
        raise SystemExit(f"results_page.py: {name}.md: no column {missing[0]!r}")
    for r in rows:
        if len(r) != len(head):
            raise SystemExit(f"results_page.py: {name}.md: a row of {len(r)} cells under "
                             f"{len(head)} columns: {' | '.join(r)}")
    return [dict(zip(head, r)) for r in rows]


def need(row, key, name):
    """row[key] as a number; anything else is an error naming the file, the column and the row."""
    v = num(row[key])
    if v is None:
        raise SystemExit(f"results_page.py: {name}.md: column {key!r} is {row[key]!r}, not a "
                         f"number, in the row {' | '.join(row.values())}")
    return v


def slower(ratios):
    """For ratios of their time over dtr's: in how many they were as fast or faster."""
    k = sum(x <= 1.005 for x in ratios)
    return f", as fast or faster in {k} of {len(ratios)}" if k else ""


def python_headline(d, behind):
    dt = table(d, "dtensor")
    gloo = [need(r, "dtr faster", "dtensor") for r in dt]
    engine = [need(r, "DTensor.redistribute, ms", "dtensor") /
              need(r, "dtr.torch.redistribute (torch engine), ms", "dtensor") for r in dt]
    behind += [f"DTensor from Python against dtr's torch engine on {r['change']}: its time / "
               f"dtr's {x:.2f}" for r, x in zip(dt, engine) if x <= 1.005]
    return (f"- **From Python, 2 ranks:** `DTensor.redistribute` takes {span(gloo, '{:.1f}')} "
            f"the time of `dtr.torch.redistribute` on dtr's Gloo, and {span(engine)} its time "
            f"on the torch engine{slower(engine)}.")


def limit_headline(d, behind):
    lim = table(d, "limit")
    ranks = ", ".join(sorted({r["ranks"] for r in lim}))
    dtr_us = [need(r, "dtr us", "limit") for r in lim]
    ompi = [need(r, "Open MPI us", "limit") / t for r, t in zip(lim, dtr_us)]
    impi = [(r, num(r["Intel MPI us"]) / t) for r, t in zip(lim, dtr_us) if num(r["Intel MPI us"])]
    line = (f"- **Distance to the memory, {ranks} ranks:** dtr's time / the limit "
            f"{span(need(r, 'dtr / limit', 'limit') for r in lim)}; Open MPI's own collectives "
            f"of the same plan take {span(ompi)} dtr's time{slower(ompi)}")
    if impi:
        line += f", Intel MPI's {span(x for _, x in impi)}{slower([x for _, x in impi])}"
    for who, rows in (("Open MPI", zip(lim, ompi)), ("Intel MPI", impi)):
        behind += [f"{who} on {r['transition']} {r['dtype']} {r['MiB']} MiB: its time / dtr's "
                   f"{x:.2f}" for r, x in rows if x <= 1.005]
    return line + "."


def other_headlines(d, behind):
    out = []
    cm = table(d, "cross_mesh")
    two = [r for r in cm if r["ranks"] == "2"]
    out.append(f"- **Between meshes, 2 ranks:** dtr's batch time / the limit "
               f"{span(need(r, 'batch / limit', 'cross_mesh') for r in two)}; gathering then "
               f"slicing takes {span(need(r, 'gather / batch', 'cross_mesh') for r in two)} its "
               f"time (8 ranks: {span(need(r, 'gather / batch', 'cross_mesh') for r in cm if r['ranks'] != '2')}).")
    behind += [f"gather-then-slice on {r['change']} {r['list']} ({r['ranks']} ranks): its time / "
               f"dtr's {r['gather / batch']}" for r in cm if need(r, "gather / batch", "cross_mesh") <= 1]
    ck = table(d, "checkpoint")
    peers = [r for r in ck if not r["way"].startswith(("dtr", "limit"))]
    ratios = [need(r, "dtr faster by", "checkpoint") for r in peers]
    size = re.search(r"model (\d+) bytes", d["checkpoint"])
    model = f" (GPT-2 medium, {int(size.group(1)) / 1e9:.2f} GB)" if size else ""
    out.append(f"- **Checkpoint loads{model}:** dtr reads at "
               f"{span((need(r, 'of its limit', 'checkpoint') for r in ck if r['way'] == 'dtr'), unit='')} "
               f"of its limit's speed; the safetensors package and PyTorch DCP take "
               f"{span(ratios)} dtr's time{slower(ratios)}.")
    behind += [f"{r['way']} ({r['ranks']} ranks, {r['page cache']} cache): its time / dtr's {x:.2f}"
               for r, x in zip(peers, ratios) if x <= 1.005]
    gr = table(d, "grad")
    for dtype in dict.fromkeys(r["dtype"] for r in gr):
        out.append(f"- **A model's gradients, 2 ranks, {dtype}:** dtr's grouped reduction takes "
                   f"{span(need(r, 'grouped / bare', 'grad') for r in gr if r['dtype'] == dtype)} "
                   f"the time of its bare collectives; PyTorch's DDP / FSDP2 over gloo take "
                   f"{span(num(r['PyTorch / grouped']) for r in gr if r['dtype'] == dtype)} dtr's.")
    behind += [f"PyTorch {r['mode']} {r['dtype']} on {r['model']}: its time / dtr's "
               f"{r['PyTorch / grouped']}" for r in gr if (num(r["PyTorch / grouped"]) or 2) <= 1]
    return out


def headlines(d):
    out, behind = ["## Headlines", ""], []
    c = d["conformance"]
    out.append(f"- **Conformance:** {c['cases']:,} random cases, {c['directions']:,} directions "
               f"against DTensor: {c['counts'].get('compared', 0):,} ran in both and agreed, the "
               f"others refused by both or known differences; **{len(c['disagreements'])} "
               f"unexplained disagreements**.")
    sp = d["speed"]["speed"]
    out.append(f"- **Speed beside DTensor, 4 CPU ranks** (dtr on Open MPI's shared memory, "
               f"DTensor on gloo, what a CPU user of each gets): dtr faster in "
               f"{sum(r['ratio'] > 1 for r in sp)} of {len(sp)} measurements; DTensor takes "
               f"{span(r['ratio'] for r in sp)} dtr's time.")
    behind += [f"DTensor on {r['transition']} at {r['mib']} MiB: its time / dtr's {r['ratio']:.2f}"
               for r in sp if r["ratio"] <= 1.005]
    out.append(python_headline(d, behind))
    pl = d["speed"]["planning"]
    out.append(f"- **Planning:** DTensor's greedy planner takes {span((r['torch_greedy_us'] / r['dtr_optimal_us'] for r in pl), '{:.1f}')} "
               f"the time of dtr's optimal planner, its graph search {span((r['torch_graph_us'] / r['dtr_optimal_us'] for r in pl), '{:,.0f}')}; "
               f"on 256 ranks (8 mesh dims) dtr plans in "
               f"{span((r['optimal'] for r in plan_bench_rows(d['plan']) if r['ranks'] == 256), '{:.0f}', ' us')}.")
    out.append(limit_headline(d, behind))
    out += other_headlines(d, behind)
    out += ["", "Where what a user could pick instead was as fast or faster in this run (their "
            "time / dtr's at most 1.00): " + ("; ".join(behind) + "." if behind else "nowhere.")]
    return out


# ---- the page ---------------------------------------------------------------------------

def read(data, name):
    path = os.path.join(data, name)
    try:
        with open(path) as f:
            return json.load(f) if name.endswith(".json") else f.read()
    except OSError as e:
        raise SystemExit(f"results_page.py: {path}: {e.strerror}: run `bash bench/results.sh` "
                         f"(or its --only STEP) first")


def page(data):
    run = read(data, "run.json")
    d = {"conformance": read(data, "conformance.json"), "speed": read(data, "speed.json"),
         "bytes": read(data, "plan_bytes.json")}
    for name in ("dtensor", "plan", "limit", "cross_mesh", "checkpoint", "grad"):
        d[name] = read(data, name + ".md")
    cmd = {k: v["command"] for k, v in run["steps"].items()}
    step = run["steps"]
    out = header(run) + [""] + headlines(d) + [""]
    out += conformance(d["conformance"], cmd["conformance"]) + [""]
    out += speed(d["speed"], cmd["speed"], d["dtensor"], cmd["dtensor"], step["speed"]["date"],
                 step["dtensor"]["date"]) + [""]
    out += planning(d["speed"], d["plan"], cmd["plan"]) + [""]
    out += plan_bytes(d["bytes"]) + [""]
    out += section("Distance to the memory: dtr, Open MPI, Intel MPI", d["limit"], step["limit"],
                   "For each transition, the least bytes each rank must read and write, over "
                   "the copy bandwidth of as many processes as ranks measured in the same run, "
                   "is the limit; each implementation's time over it (1.00 is the memory's "
                   "speed; the probe itself moves by its \"copy spread\", so a ratio a little "
                   "under 1 is within its noise). dtr: `dtr run` on private buffers; dtr "
                   "shared: the same with `--buffers shared` (the blocks in a dtr_context_alloc "
                   "allocation, which reductions read in place). Open MPI: the same plan's "
                   "collectives called alone with dtr's shared-memory paths off; Intel MPI: "
                   "bench/coll_bench.c built with its compiler wrapper, f32 only and no "
                   "all-to-all (\"-\"). Method: docs/executor-bench.md.",
                   "limit.png", "time over the memory limit") + [""]
    out += section("Between meshes", d["cross_mesh"], step["cross_mesh"],
                   "dtr's batch, the same tensors one plan at a time, and gather-then-slice "
                   "(Open MPI's all-reduce / all-gather on the source ranks, the whole tensor "
                   "sent to each destination rank, sliced there), beside the limit (the busiest "
                   "destination rank's bytes written once at the copy bandwidth). Method: "
                   "docs/cross-mesh.md.", "cross_mesh.png", "between meshes") + [""]
    out += section("Checkpoint loads", d["checkpoint"], step["checkpoint"],
                   "A generated GPT-2 medium (one safetensors file) loaded into 2x2 on 4 ranks "
                   "and into 2 on 2 ranks, by dtr, the safetensors package and PyTorch DCP, "
                   "beside reading the same bytes sequentially (the limit). \"of its limit\" "
                   "is the limit's time over the way's (1.00: the speed of the read; above 1 "
                   "within the limit's noise); \"dtr faster by\" is the way's time over dtr's "
                   "into the same kind of buffers (below 1: the way was faster). Method: "
                   "docs/checkpoint.md.", "checkpoint.png", "checkpoint loads") + [""]
    out += section("A model's gradients", d["grad"], step["grad"],
                   "Gradient reduction of whole models, dtr grouped and per tensor, the bare "
                   "collectives of every element, the memory limit, and PyTorch's DDP (25 MiB "
                   "buckets) and FSDP2 reduce-scatter over gloo. The parameters are f32; in the "
                   "bf16 rows bf16 is the reduce dtype, so dtr casts every gradient in and the "
                   "result out, which the bare collectives (on bf16 buffers) and the limit (the "
                   "f32 bytes read and written once) leave out. Method: grad/README.md.",
                   "grad.png", "gradient reduction")
    out += ["", "## Executor overhead", "",
            "The executor against its own collectives called bare, on 2, 4 and 8 ranks, is "
            "measured by `bash bench/exec_bench.sh` ([executor-bench.md](executor-bench.md))."]
    return "\n".join(out) + "\n"


README_BEGIN = "<!-- results: written by bench/results_page.py from docs/results/ -->"
README_END = "<!-- results: end -->"


def readme_block(data):
    """README.md's paragraph of figures, from the same files as the page."""
    run = read(data, "run.json")
    c, s = read(data, "conformance.json"), read(data, "speed.json")
    sp, pl = s["speed"], s["planning"]
    dt = [num(r.get("dtr faster", "")) for r in rows_of(read(data, "dtensor.md"))]
    big = max(r["mib"] for r in sp)
    at_big = ", ".join(f"{r['transition']} {r['ratio']:.1f}x" for r in sp if r["mib"] == big)
    c_ok = c["counts"].get("compared", 0)
    text = (f"Measured on {run['date']} by `bash bench/results.sh` "
            f"([docs/results.md](docs/results.md), {run['machine']['cores']} cores, "
            f"{duration(run['total_seconds'])}), against PyTorch DTensor {c['torch'].split('+')[0]} "
            f"on CPU: the same layouts, values and gradients in all {c_ok:,} directions that "
            f"both ran of {c['cases']:,} random cases ({len(c['disagreements'])} unexplained "
            f"disagreements); on 4 ranks dtr is faster in "
            f"{sum(r['ratio'] > 1 for r in sp)} of {len(sp)} redistributions (DTensor's time "
            f"over dtr's at {big} MiB: {at_big}); DTensor's greedy planner takes "
            f"{span((r['torch_greedy_us'] / r['dtr_optimal_us'] for r in pl), '{:.1f}')} dtr's "
            f"planning time and its graph search up to "
            f"{max(r['torch_graph_us'] / r['dtr_optimal_us'] for r in pl):,.0f}x. From Python "
            f"(`dtr.torch.redistribute` beside `DTensor.redistribute` in the same processes, 2 "
            f"ranks, [docs/python.md](docs/python.md)): DTensor takes {span(dt, '{:.1f}')} "
            f"dtr's time.")
    return textwrap.fill(text, width=94, break_long_words=False, break_on_hyphens=False)


def with_readme_block(readme, block):
    """readme with the text between its two markers replaced by block."""
    i, j = readme.find(README_BEGIN), readme.find(README_END)
    if i < 0 or j < i:
        raise SystemExit(f"results_page.py: README.md lacks the markers {README_BEGIN!r} "
                         f"... {README_END!r}")
    return readme[:i + len(README_BEGIN)] + "\n" + block + "\n" + readme[j:]


def write(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True, help="the run's files (docs/results)")
    ap.add_argument("--out", required=True, help="the page to write (docs/results.md)")
    ap.add_argument("--readme", help="also rewrite this README.md's paragraph of figures")
    args = ap.parse_args()
    text = page(args.data)
    readme = None
    if args.readme:
        with open(args.readme) as f:
            readme = with_readme_block(f.read(), readme_block(args.data))
    write(args.out, text)
    if readme is not None:
        write(args.readme, readme)


if __name__ == "__main__":
    main()
