#!/usr/bin/env python3
"""Compares builds of memslope on malloc_bench, in turns, on a noisy machine.

    python3 bench/compare.py --save NAME
        copies build/bin, build/lib and build/share to
        build/bench/builds/NAME (a build to compare against later, safe
        from rebuilds of the tree)

    python3 bench/compare.py [-t THREADS] [-r ROUNDS] [-n OPS] [-W WORK]
                             [--record-args ARGS] NAME...
        runs plain and `memslope record` of each saved build NAME (or
        "tree" for build/ as it is; or floor:pass and floor:set, the
        benchmark under bench/held_floor.c's preload, nothing recorded:
        the floor under the sampled rows) in turns, ROUNDS times, and prints for
        each: median wall time, its paired ratio to plain (median over
        rounds of this run / the same round's plain run), the benchmark's
        own CPU time (its cpu_s= line) and the tracer's (the whole tree's
        user + sys minus the benchmark's), with quartiles.

Each build has a symbol cache of its own (build/bench/cache/NAME): the
cache is tied to the memslope binary that wrote it, so builds run in turns
on one cache each found it stale and read every module's debug info again,
every run (libc's alone is tens of milliseconds).

Wall times here move by a third when the host's load changes; the paired
ratio and the CPU times are the figures to compare. For instruction counts,
which the noise does not move, use valgrind --tool=callgrind (see
docs/performance.md).
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run as bench_run  # noqa: E402  (run.py, the full benchmark: its way of running a command)

ROOT = bench_run.ROOT
BUILDS = os.path.join(ROOT, "build", "bench", "builds")
BENCH = os.path.join(ROOT, "build", "bench", "malloc_bench")
HELD_FLOOR = os.path.join(ROOT, "build", "bench", "held_floor.so")
FLOOR_MODES = ("pass", "set")


def save(name):
    dest = os.path.join(BUILDS, name)
    shutil.rmtree(dest, ignore_errors=True)
    # share/ too: a saved memslope's report finds its default suppressions
    # beside it (../share/memslope/default.supp), else it applies none
    for part in ("bin", "lib", "share"):
        shutil.copytree(os.path.join(ROOT, "build", part), os.path.join(dest, part))
    print("saved build/bin, build/lib and build/share as %s" % dest)


def memslope_of(name):
    base = os.path.join(ROOT, "build") if name == "tree" else os.path.join(BUILDS, name)
    path = os.path.join(base, "bin", "memslope")
    if not os.path.exists(path):
        sys.exit("compare.py: no build named %r (save one with --save %s)" % (name, name))
    return path


def with_own_cache(name, cmd):
    """cmd run with build name's own symbol cache (see the docstring)."""
    cache = os.path.join(ROOT, "build", "bench", "cache", name)
    os.makedirs(cache, exist_ok=True)
    return ["env", "XDG_CACHE_HOME=" + cache] + cmd


def command_of(name, bench, trace, record_args):
    """The command that runs bench as build name does."""
    if name.startswith("floor:"):
        mode = name[len("floor:"):]
        if mode not in FLOOR_MODES:
            sys.exit("compare.py: no floor named %r (floor:pass or floor:set)" % name)
        return ["env", "LD_PRELOAD=" + HELD_FLOOR, "HELD_FLOOR=" + mode] + bench
    return with_own_cache(name, [memslope_of(name), "record"] + record_args.split() + ["-o", trace, "--"] + bench)


def run_once(cmd, out_dir, tag):
    """Wall seconds, the tree's user+sys seconds, the benchmark's cpu_s
    (run.py's run(), which keeps the output in out_dir)."""
    res = bench_run.run(cmd, out_dir, tag)
    if res["status"] != 0:
        sys.exit("compare.py: %s exited %d:\n%s" % (" ".join(cmd), res["status"], res["stderr"]))
    m = re.search(r"cpu_s=([0-9.]+)", res["stderr"])
    return res["wall"], res["cpu"], float(m.group(1)) if m else 0.0


def quartiles(values):
    q = statistics.quantiles(values, n=4) if len(values) > 1 else [values[0]] * 3
    return "%.3f (%.3f-%.3f)" % (statistics.median(values), q[0], q[2])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--save", metavar="NAME", help="save the current build under NAME and exit")
    ap.add_argument("-t", "--threads", type=int, default=1)
    ap.add_argument("-r", "--rounds", type=int, default=9)
    ap.add_argument("-n", "--ops", type=int, default=2000000)
    ap.add_argument("-W", "--work", type=int, default=0)
    ap.add_argument("--record-args", default="", help="extra options for memslope record, e.g. '--sample-rate 512K'")
    ap.add_argument("builds", nargs="*")
    args = ap.parse_args()
    if args.save:
        save(args.save)
        return
    if not args.builds:
        ap.error("name at least one build (or 'tree')")
    if not os.path.exists(BENCH) or not os.path.exists(HELD_FLOOR):
        subprocess.run(["make", "-C", os.path.join(ROOT, "bench"), "build"], check=True)
    bench = [BENCH, "-t", str(args.threads), "-n", str(args.ops), "-W", str(args.work)]
    trace = os.path.join(ROOT, "build", "bench", "compare.trace")
    configs = [("plain", bench)] + [(name, command_of(name, bench, trace, args.record_args)) for name in args.builds]
    out_dir = os.path.join(ROOT, "build", "bench", "compare")
    os.makedirs(out_dir, exist_ok=True)
    results = {name: [] for name, _ in configs}
    for rnd in range(args.rounds):
        for name, cmd in configs:
            results[name].append(run_once(cmd, out_dir, name))
        print("round %d/%d: %s" % (rnd + 1, args.rounds, "  ".join(
            "%s %.3f" % (name, results[name][-1][0]) for name, _ in configs)), flush=True)
    plain = results["plain"]
    print("\nmalloc_bench -t %d -n %d -W %d, %d rounds in turns%s"
          % (args.threads, args.ops, args.work, args.rounds,
             ", record " + args.record_args if args.record_args else ""))
    print("%-12s %-22s %-8s %-22s %-22s" % ("", "wall s", "paired", "benchmark cpu s", "tracer cpu s"))
    for name, _ in configs:
        r = results[name]
        paired = statistics.median(w / p[0] for (w, _, _), p in zip(r, plain))
        tracer = [tree - own for _, tree, own in r]
        print("%-12s %-22s %-8s %-22s %-22s"
              % (name, quartiles([x[0] for x in r]), "%.3f" % paired, quartiles([x[2] for x in r]),
                 "-" if name == "plain" else quartiles(tracer)))


if __name__ == "__main__":
    main()
