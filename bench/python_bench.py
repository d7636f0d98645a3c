#!/usr/bin/env python3
"""memslope on Python workloads (make bench; docs/performance.md).

Two workloads under the system interpreter, every object recorded:
  alloc_heavy  bench/python/alloc_heavy.py: pure Python that allocates and
               frees ~10 million objects (parsing, grouping, sorting)
  extension    fixtures/python/bench_leakdemo.py --markers: the example C
               extension's three cases, 60,000 marked iterations each
and the fixed cost of one image (issue 18's item 4):
  startup      python3 -c pass, plainly and recorded, the symbol cache warm
               (a run before the measured ones): the paired difference in
               milliseconds, against a bar of 50 ms
Each runs plainly, under `memslope record` (pymalloc's objects through the
wrapped allocator domains, the default), under `memslope record` with
PYTHONMALLOC=malloc, and under heaptrack with PYTHONMALLOC=malloc (heaptrack
sees objects only through malloc), in turns; prints medians, the paired
ratio to plain, trace sizes and the tracer's peak RSS (a separate, polled run).
--compare NAME adds a build saved with bench/compare.py --save NAME to the
turns (memslope@NAME), to compare two builds within one run.

Exit status: 0 when every run behaved (exit 0, same output as plain), 1 otherwise.
The bars are reported, not enforced.
"""
import argparse
import glob
import os
import shutil
import statistics
import sys

from run import fmt_bytes, run, run_polled

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BARS = {"ratio": 3.0, "trace_bytes": 8 << 20, "tracer_rss_kib": 150 << 10, "startup_ms": 50.0}


def workloads(args, build):
    extension_dir = os.path.join(build, "fixtures", "python")
    return [
        ("alloc_heavy", [args.python, os.path.join(HERE, "python", "alloc_heavy.py"), str(args.rounds_of_work)], None),
        ("extension", [args.python, os.path.join(extension_dir, "bench_leakdemo.py"), "--markers",
                       str(args.iterations)], extension_dir),
    ]


def configs(args, memslope):
    out = [("plain", lambda cmd, trace: cmd, {}, None),
           ("memslope", lambda cmd, trace: [memslope, "record", "-o", trace, "--"] + cmd, {}, ".trace")]
    for name in args.compare:
        saved = os.path.join(ROOT, "build", "bench", "builds", name, "bin", "memslope")
        # A symbol cache of its own: a cache written by another memslope
        # binary is stale to this one, and runs in turns on one cache read
        # every module's debug info again, every run, for both builds.
        cache = os.path.join(ROOT, "build", "bench", "cache", name)
        os.makedirs(cache, exist_ok=True)
        out.append(("memslope@" + name, lambda cmd, trace, saved=saved: [saved, "record", "-o", trace, "--"] + cmd,
                    {"XDG_CACHE_HOME": cache}, ".trace"))
    out.append(("memslope-malloc", lambda cmd, trace: [memslope, "record", "-o", trace, "--"] + cmd,
                {"PYTHONMALLOC": "malloc"}, ".trace"))
    if args.heaptrack:
        out.append(("heaptrack-malloc", lambda cmd, trace: [args.heaptrack, "-o", trace] + cmd,
                    {"PYTHONMALLOC": "malloc"}, "heaptrack"))
    return out


def trace_files(trace, kind):
    if kind == ".trace":
        return [trace] if os.path.exists(trace) else []
    if kind == "heaptrack":
        return glob.glob(trace + ".*")
    return []


def with_env(env, cmd):
    return ["env"] + ["%s=%s" % kv for kv in env.items()] + cmd if env else cmd


def checksum_lines(output):
    """The workload's own output (heaptrack adds its lines to stdout)."""
    return [line for line in output.splitlines() if line.startswith("checksum")]


def measure(args, memslope, name, cmd, path, out_dir):
    results = {}
    expected = None
    os.environ["PYTHONPATH"] = ":".join(p for p in [path, os.path.join(os.path.dirname(memslope), "..", "lib",
                                                                        "memslope", "python")] if p)
    for rnd in range(args.rounds):
        for config, make, env, kind in configs(args, memslope):
            tag = "%s-%s-r%d" % (name, config, rnd)
            trace = os.path.join(out_dir, tag + (".trace" if kind == ".trace" else ""))
            for old in glob.glob(trace + "*"):
                os.unlink(old)
            res = run(with_env(env, make(cmd, trace)), out_dir, tag)
            if res["status"] != 0:
                print("PROBLEM: %s exited %s (see %s/%s.stderr)" % (tag, res["status"], out_dir, tag))
                return None
            output = checksum_lines(res["stdout"])
            if expected is None:
                expected = output
            elif output != expected:
                print("PROBLEM: %s printed %r, plain printed %r" % (tag, output, expected))
                return None
            files = trace_files(trace, kind)
            res["trace_bytes"] = sum(os.path.getsize(f) for f in files)
            results.setdefault(config, []).append(res)
            print("  %-12s round %d %-17s wall %7.3f s  cpu %7.3f s  trace %s" % (
                name, rnd + 1, config, res["wall"], res["cpu"], fmt_bytes(res["trace_bytes"]) if kind else "-"),
                flush=True)
            if rnd < args.rounds - 1:
                for f in files:
                    os.unlink(f)
    return results


def measure_startup(args, memslope, out_dir):
    """python3 -c pass in every configuration but the PYTHONMALLOC and
    heaptrack ones, args.startup_runs times in turns after one warm-up run
    each (which fills that build's symbol cache): per configuration, the wall
    times and their paired differences to plain."""
    cmd = [args.python, "-c", "pass"]
    wanted = [c for c in configs(args, memslope) if c[0] == "plain" or c[0].startswith("memslope") and not c[2].get(
        "PYTHONMALLOC")]
    walls = {}
    for rnd in range(args.startup_runs + 1):
        for config, make, env, kind in wanted:
            trace = os.path.join(out_dir, "startup-%s.trace" % config)
            res = run(with_env(env, make(cmd, trace)), out_dir, "startup-%s" % config)
            if res["status"] != 0:
                print("PROBLEM: startup %s exited %s (see %s/startup-%s.stderr)" % (config, res["status"], out_dir,
                                                                                  config))
                return None
            if rnd > 0:
                walls.setdefault(config, []).append(res["wall"])
    return walls


def summarise_startup(walls):
    plain = walls["plain"]
    print("\nstartup (python3 -c pass, symbol cache warm, %d runs in turns): plain median %.1f ms" % (
        len(plain), statistics.median(plain) * 1000))
    for config, runs in walls.items():
        if config == "plain":
            continue
        over = [(r - p) * 1000 for r, p in zip(runs, plain)]
        line = "  %-17s median %6.1f ms  over plain, paired: median %5.1f ms (min %.1f, max %.1f)" % (
            config, statistics.median(runs) * 1000, statistics.median(over), min(over), max(over))
        if config == "memslope":
            line += "  bar: %s %.0f ms" % ("<=" if statistics.median(over) <= BARS["startup_ms"] else ">",
                                          BARS["startup_ms"])
        print(line)


def tracer_peak(memslope, cmd, out_dir, name):
    trace = os.path.join(out_dir, name + "-polled.trace")
    peaks = run_polled([memslope, "record", "-o", trace, "--"] + cmd, out_dir, name + "-polled")
    return max((kib for comm, kib in peaks.values() if comm == "memslope"), default=None)


def summarise(name, results, peak_kib):
    plain = [r["wall"] for r in results["plain"]]
    print("\n%s: plain median %.3f s" % (name, statistics.median(plain)))
    verdicts = []
    for config, runs in results.items():
        if config == "plain":
            continue
        ratios = [r["wall"] / p for r, p in zip(runs, plain)]
        size = statistics.median(r["trace_bytes"] for r in runs)
        print("  %-17s median %7.3f s  paired ratio median %5.2fx (min %.2f, max %.2f)  trace %s" % (
            config, statistics.median(r["wall"] for r in runs), statistics.median(ratios), min(ratios),
            max(ratios), fmt_bytes(size)))
        if config == "memslope":
            verdicts.append("ratio %.2fx %s %.1fx" % (statistics.median(ratios),
                                                      "<=" if statistics.median(ratios) <= BARS["ratio"] else ">",
                                                      BARS["ratio"]))
            verdicts.append("trace %s %s %s" % (fmt_bytes(size), "<=" if size <= BARS["trace_bytes"] else ">",
                                                fmt_bytes(BARS["trace_bytes"])))
    if peak_kib is not None:
        verdicts.append("tracer peak RSS %s %s %s" % (fmt_bytes(peak_kib * 1024),
                                                       "<=" if peak_kib <= BARS["tracer_rss_kib"] else ">",
                                                       fmt_bytes(BARS["tracer_rss_kib"] * 1024)))
    print("  bars (memslope, default settings): " + "; ".join(verdicts))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--iterations", type=int, default=60000, help="iterations per case of the extension driver")
    parser.add_argument("--rounds-of-work", type=int, default=300, help="alloc_heavy.py's rounds")
    parser.add_argument("--python", default="/usr/bin/python3")
    parser.add_argument("--no-heaptrack", action="store_true")
    parser.add_argument("--compare", metavar="NAME", action="append", default=[],
                        help="also run the build saved as NAME (bench/compare.py --save NAME), in turns")
    parser.add_argument("--only", metavar="WORKLOAD", help="run one workload: alloc_heavy, extension or startup")
    parser.add_argument("--startup-runs", type=int, default=30, help="measured runs of the startup workload")
    args = parser.parse_args()
    build = os.path.join(ROOT, "build")
    for name in args.compare:
        if not os.path.exists(os.path.join(build, "bench", "builds", name, "bin", "memslope")):
            print("python_bench: no build saved as %r (python3 bench/compare.py --save %s)" % (name, name))
            return 2
    memslope = os.path.join(build, "bin", "memslope")
    args.heaptrack = None if args.no_heaptrack else shutil.which("heaptrack")
    if not glob.glob(os.path.join(build, "fixtures", "python", "leakdemo*.so")):
        print("python_bench: the example extension is not built (make fixtures; needs python3-dev)")
        return 1
    out_dir = os.path.join(build, "bench", "python")
    os.makedirs(out_dir, exist_ok=True)
    print("python_bench: %s, %d rounds in turns; heaptrack: %s" % (args.python, args.rounds,
                                                                 args.heaptrack or "not installed"))
    failed = False
    for name, cmd, path in workloads(args, build):
        if args.only and name != args.only:
            continue
        results = measure(args, memslope, name, cmd, path, out_dir)
        if results is None:
            failed = True
            continue
        summarise(name, results, tracer_peak(memslope, cmd, out_dir, name))
    if not args.only or args.only == "startup":
        walls = measure_startup(args, memslope, out_dir)
        if walls is None:
            failed = True
        else:
            summarise_startup(walls)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
