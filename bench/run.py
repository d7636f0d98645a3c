#!/usr/bin/env python3
"""memslope overhead benchmarks (make bench). See docs/performance.md.

Runs bench/malloc_bench plainly, under `memslope record`, under
`memslope record --sample-rate 512K` and under `heaptrack`, in turns
(A B C D A B C D ...), for 1, 2 and 8 threads, besides two floors: the shim
loaded recording nothing (shim-only) and a preload that only keeps every
block in a per-thread set (held-floor, bench/held_floor.c, beside the
sampled run); prints medians, ratios to the
plain run, trace sizes and peak RSS; checks that memslope's totals equal
the benchmark's own malloc/free counts (and memcheck's "total heap usage");
times `memslope report` on a trace of ten million allocations.

Exit status: 0 when every run behaved (same checksum as plain, exit 0,
counts exact), 1 otherwise. The quality bars are reported, not enforced.
"""
import argparse
import glob
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# memslope/plain wall-time ratio, by thread count (issue 18: 8 threads on a
# 2-core machine is where the tracer competes hardest for a core).
BARS = {1: 1.6, 2: 2.0, 8: 2.5}
# memslope-512K/plain wall-time ratio, any thread count, restated by issue 18
# at a realistic allocation rate: the floor of any preload recorder that keeps
# counts and the leak check exact sits above 1.1x on an allocation-only loop.
SAMPLED_BARS = {0: 1.25, 800: 1.05}  # by --work; other --work values: no bar


def sampled_bar(work):
    return SAMPLED_BARS.get(work)
HEAPTRACK_FRACTION = 0.5  # memslope ratio <= this x heaptrack ratio
TIME = "/usr/bin/time" if os.access("/usr/bin/time", os.X_OK) else None

problems = []


def problem(msg):
    problems.append(msg)
    print("PROBLEM: " + msg, flush=True)


def run(cmd, out_dir, tag):
    """Runs cmd; returns wall seconds, CPU seconds of the whole process tree,
    max RSS (KiB) of the largest process in the tree (wait4, as /usr/bin/time
    -v reports it), exit status, stdout, stderr."""
    so_path = os.path.join(out_dir, tag + ".stdout")
    se_path = os.path.join(out_dir, tag + ".stderr")
    rss_path = os.path.join(out_dir, tag + ".maxrss")
    if TIME:
        # ru_maxrss from our own wait4 would count this Python process's RSS
        # at the fork (it is carried over exec); GNU time's own is ~2 MiB.
        cmd = [TIME, "-f", "%M", "-o", rss_path] + cmd
    with open(so_path, "wb") as so, open(se_path, "wb") as se:
        t0 = time.monotonic()
        p = subprocess.Popen(cmd, stdout=so, stderr=se, stdin=subprocess.DEVNULL)
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.monotonic() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
    with open(so_path, "rb") as f:
        out = f.read().decode(errors="replace")
    with open(se_path, "rb") as f:
        err = f.read().decode(errors="replace")
    maxrss = ru.ru_maxrss
    if TIME:
        try:
            with open(rss_path) as f:
                maxrss = int(f.read().split()[-1])
        except (OSError, ValueError, IndexError):
            pass
    return {"wall": wall, "cpu": ru.ru_utime + ru.ru_stime, "maxrss_kib": maxrss,
            "status": p.returncode, "stdout": out, "stderr": err}


def checksum_of(res):
    m = re.search(r"^checksum ([0-9a-f]+)$", res["stdout"], re.M)
    return m.group(1) if m else None


def bench_counts(res):
    m = re.search(r"malloc_bench: threads=\d+ ops=\d+ mallocs=(\d+) frees=(\d+)", res["stderr"])
    return (int(m.group(1)), int(m.group(2))) if m else None


# --- peak RSS of each process in a tree, by polling /proc ---------------------

def proc_table():
    table = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                s = f.read()
        except OSError:
            continue
        rp = s.rfind(")")
        comm = s[s.find("(") + 1:rp]
        ppid = int(s[rp + 2:].split()[1])
        table[int(d)] = (ppid, comm)
    return table


def vm_hwm(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def run_polled(cmd, out_dir, tag, period=0.01):
    """Runs cmd and polls VmHWM of every process in its tree every `period`
    seconds. Returns {pid: (comm, peak KiB)}. A separate run from the timed
    ones: the polling costs CPU."""
    peaks = {}
    with open(os.path.join(out_dir, tag + ".stdout"), "wb") as so, \
            open(os.path.join(out_dir, tag + ".stderr"), "wb") as se:
        p = subprocess.Popen(cmd, stdout=so, stderr=se, stdin=subprocess.DEVNULL)
        while p.poll() is None:
            table = proc_table()
            tree = {p.pid}
            grew = True
            while grew:
                grew = False
                for pid, (ppid, _) in table.items():
                    if ppid in tree and pid not in tree:
                        tree.add(pid)
                        grew = True
            for pid in tree:
                hwm = vm_hwm(pid)
                comm = table.get(pid, (0, "?"))[1]
                if hwm is not None and (pid not in peaks or hwm >= peaks[pid][1]):
                    peaks[pid] = (comm, hwm)
            time.sleep(period)
    return peaks


# --- the overhead benchmark ----------------------------------------------------

def overhead(args, memslope, bench, out_dir, threads, sample_ok):
    n = args.ops
    base = [bench, "-t", str(threads), "-n", str(n), "-W", str(args.work)]
    configs = [("plain", lambda tr: base, None)]
    # The shim loaded but recording nothing (no tracer): what interposing
    # malloc and free costs by itself, the floor of any LD_PRELOAD recorder.
    shim = os.path.join(os.path.dirname(memslope), "..", "lib", "memslope", "libmemslope.so")
    if os.path.exists(shim):
        configs.append(("shim-only", lambda tr: ["env", "LD_PRELOAD=" + os.path.abspath(shim)] + base, None))
    configs.append(("memslope", lambda tr: [memslope, "record", "-o", tr, "--"] + base, ".trace"))
    if sample_ok:
        configs.append(("memslope-512K",
                        lambda tr: [memslope, "record", "--sample-rate", "512K", "-o", tr, "--"] + base,
                        ".trace"))
        # Every block kept in a per-thread set and nothing else (held_floor.c):
        # what exact counts cost a sampled run in the program's own threads.
        floor = os.path.join(os.path.dirname(bench), "held_floor.so")
        if os.path.exists(floor):
            configs.append(("held-floor", lambda tr: ["env", "LD_PRELOAD=" + floor, "HELD_FLOOR=set"] + base, None))
    if args.heaptrack:
        configs.append(("heaptrack", lambda tr: [args.heaptrack, "-o", tr] + base, "heaptrack"))

    results = {name: [] for name, _, _ in configs}
    sizes = {}
    expected_sum = None
    for rnd in range(args.rounds):
        for name, mk, kind in configs:
            tag = "t%d-%s-r%d" % (threads, name, rnd)
            trace = os.path.join(out_dir, tag + (".trace" if kind == ".trace" else ""))
            for old in glob.glob(trace + "*"):
                os.unlink(old)
            res = run(mk(trace), out_dir, tag)
            cs = checksum_of(res)
            if res["status"] != 0 or cs is None:
                problem("%s: exit status %s, checksum %s (see %s/%s.stderr)"
                        % (tag, res["status"], cs, out_dir, tag))
            elif expected_sum is None:
                expected_sum = cs
            elif cs != expected_sum:
                problem("%s: checksum %s differs from %s" % (tag, cs, expected_sum))
            if kind == ".trace":
                files = [trace]
            elif kind == "heaptrack":
                files = glob.glob(trace + ".*")
            else:
                files = []
            size = sum(os.path.getsize(f) for f in files if os.path.exists(f))
            if kind and size == 0:
                problem("%s: no trace file" % tag)
            res["trace_bytes"] = size
            res["trace_file"] = files[0] if files else None
            results[name].append(res)
            print("  t=%d round %d %-14s wall %6.3f s  cpu %6.3f s  maxrss %7d KiB  trace %s"
                  % (threads, rnd + 1, name, res["wall"], res["cpu"], res["maxrss_kib"],
                     fmt_bytes(size) if kind else "-"), flush=True)
            # keep only the last round's traces on disk
            if rnd < args.rounds - 1:
                for f in files:
                    os.unlink(f)
    return configs, results


def fmt_bytes(n):
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div:
            return "%.1f %s" % (n / div, unit)
    return "%d B" % n


def tracer_rss(args, memslope, bench, out_dir, threads, sample_ok):
    """One polled run per tracer: peak RSS of the tracer's own processes
    (memslope: the memslope process; heaptrack: heaptrack_interpret + zstd)
    and of the target."""
    base = [bench, "-t", str(threads), "-n", str(args.ops), "-W", str(args.work)]
    out = {}
    cmds = [("plain", base),
            ("memslope", [memslope, "record", "-o", os.path.join(out_dir, "rss.trace"), "--"] + base)]
    if sample_ok:
        cmds.append(("memslope-512K", [memslope, "record", "--sample-rate", "512K", "-o",
                                        os.path.join(out_dir, "rss.trace"), "--"] + base))
    if args.heaptrack:
        cmds.append(("heaptrack", [args.heaptrack, "-o", os.path.join(out_dir, "rss-ht")] + base))
    for name, cmd in cmds:
        peaks = run_polled(cmd, out_dir, "t%d-rss-%s" % (threads, name))
        target = max((kib for comm, kib in peaks.values() if comm == "malloc_bench"), default=0)
        if name.startswith("memslope"):
            tracer = max((kib for comm, kib in peaks.values() if comm == "memslope"), default=0)
        elif name == "heaptrack":
            tracer = sum(kib for comm, kib in peaks.values()
                         if comm in ("heaptrack_inter", "heaptrack_interpret", "zstd"))
        else:
            tracer = 0
        out[name] = {"tracer_kib": tracer, "target_kib": target,
                     "processes": sorted(set("%s:%d" % v for v in peaks.values()))}
    for f in glob.glob(os.path.join(out_dir, "rss*")):
        os.unlink(f)
    return out


def report_json(memslope, trace):
    r = subprocess.run([memslope, "report", "--format", "json", trace],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if r.returncode != 0:
        raise RuntimeError("memslope report --format json %s: %s" % (trace, r.stderr.decode()))
    return json.loads(r.stdout)


SITE_RE = re.compile(r"^site_\d+$")


def bench_site_allocations(doc):
    """Allocations at the benchmark's own malloc sites (site_NN frames)."""
    total = 0
    for case in doc.get("cases", []):
        for site in case.get("sites", []):
            if any(SITE_RE.match(fr.get("function") or "") for fr in site.get("frames", [])):
                total += site.get("allocations", 0)
    return total


def counts_exceed_by(bc, tot, extra):
    """Whether memslope's totals exceed the benchmark's own counts bc
    (allocations, frees) by exactly extra (libc's own, from a -n 0 run)."""
    return tot["allocations"] - bc[0] == extra[0] and tot["frees"] - bc[1] == extra[1]


def report_count_check(line, ok):
    print("  " + line, flush=True)
    if not ok:
        problem("count check: " + line)


def sampled_count_check(memslope, threads, sampled_run, counts):
    """--sample-rate keeps every allocation and free counted: the sampled
    run's totals must exceed the benchmark's own counts by exactly what
    libc adds (the same difference as the unsampled run's)."""
    bc = bench_counts(sampled_run)
    tot = report_json(memslope, sampled_run["trace_file"])["totals"]
    ok = counts_exceed_by(bc, tot, counts["libc_extra"])
    report_count_check("t=%d --sample-rate 512K: benchmark made %d allocations, %d frees; memslope counted %d, %d: %s"
                       % (threads, bc[0], bc[1], tot["allocations"], tot["frees"], "exact" if ok else "MISMATCH"),
                       ok)
    return ok


def count_check(args, memslope, bench, out_dir, threads, last_memslope_run):
    """memslope's totals minus the benchmark's own counts must equal the same
    difference for a run that does no operations (libc's own allocations,
    such as stdout's buffer), and the site_NN sites must hold exactly
    threads x ops allocations."""
    res = last_memslope_run
    bc = bench_counts(res)
    doc = report_json(memslope, res["trace_file"])
    tot = doc["totals"]
    zero_trace = os.path.join(out_dir, "t%d-zero.trace" % threads)
    zres = run([memslope, "record", "-o", zero_trace, "--", bench, "-t", str(threads), "-n", "0"],
               out_dir, "t%d-zero" % threads)
    zbc = bench_counts(zres)
    ztot = report_json(memslope, zero_trace)["totals"]
    extra_a = ztot["allocations"] - zbc[0]
    extra_f = ztot["frees"] - zbc[1]
    at_sites = bench_site_allocations(doc)
    ok = counts_exceed_by(bc, tot, (extra_a, extra_f)) and at_sites == threads * args.ops
    report_count_check("t=%d: benchmark made %d allocations, %d frees; memslope counted %d allocations, %d frees "
                       "(libc's own at -n 0: %+d, %+d); at the site_NN sites: %d (expected %d): %s"
                       % (threads, bc[0], bc[1], tot["allocations"], tot["frees"], extra_a, extra_f,
                          at_sites, threads * args.ops, "exact" if ok else "MISMATCH"), ok)
    return {"bench_allocations": bc[0], "bench_frees": bc[1], "memslope_allocations": tot["allocations"],
            "memslope_frees": tot["frees"], "libc_extra": [extra_a, extra_f],
            "site_allocations": at_sites, "exact": ok}


def memcheck_check(args, memslope, bench, out_dir, threads):
    """On a smaller run: memslope's totals against memcheck's total heap usage."""
    vg = shutil.which("valgrind")
    if not vg:
        return None
    n = str(args.memcheck_ops)
    base = [bench, "-t", str(threads), "-n", n]
    # memcheck as it runs by default: it frees libc's own buffers at exit
    # (stdout's, the threads' bookkeeping), and so does memslope.
    v = run([vg, "--tool=memcheck", "--leak-check=no"] + base, out_dir, "t%d-memcheck" % threads)
    m = re.search(r"total heap usage: ([\d,]+) allocs, ([\d,]+) frees", v["stderr"])
    if not m:
        problem("t=%d: no total heap usage line from memcheck" % threads)
        return None
    vc = (int(m.group(1).replace(",", "")), int(m.group(2).replace(",", "")))
    trace = os.path.join(out_dir, "t%d-memcheck.trace" % threads)
    run([memslope, "record", "-o", trace, "--"] + base, out_dir, "t%d-memcheck-ms" % threads)
    tot = report_json(memslope, trace)["totals"]
    ok = (tot["allocations"], tot["frees"]) == vc
    line = ("t=%d, -n %s: memcheck total heap usage %d allocs, %d frees; memslope %d allocations, "
            "%d frees: %s" % (threads, n, vc[0], vc[1], tot["allocations"], tot["frees"],
                              "equal" if ok else "DIFFERENT"))
    print("  " + line, flush=True)
    if not ok:
        problem("memcheck check: " + line)
    return {"ops": args.memcheck_ops, "memcheck": list(vc),
            "memslope": [tot["allocations"], tot["frees"]], "equal": ok}


def perf_instructions(args, memslope, bench, out_dir, sample_ok):
    """Instructions per malloc/free pair, from perf stat (user and kernel, whole
    tree), as the difference between -n OPS and -n 0. None where perf cannot
    count instructions (virtual machines often cannot)."""
    perf = shutil.which("perf")
    if not perf:
        return None, "perf not installed"
    probe = subprocess.run([perf, "stat", "-x,", "-e", "instructions", "true"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    text = probe.stderr.decode(errors="replace")
    if probe.returncode != 0 or "<not supported>" in text or "<not counted>" in text \
            or not re.search(r"^\d+,", text, re.M):
        return None, "perf stat -e instructions does not count here: " + \
            (text.strip().splitlines() or ["?"])[-1]
    n = args.ops

    def count(cmd, tag):
        r = run([perf, "stat", "-x,", "-e", "instructions", "--"] + cmd, out_dir, tag)
        m = re.search(r"^(\d+),[^,]*,instructions", r["stderr"], re.M)
        return int(m.group(1)) if m else None

    out = {}
    for name in ["plain", "memslope"] + (["memslope-512K"] if sample_ok else []) + \
            (["heaptrack"] if args.heaptrack else []):
        vals = []
        for ops in (n, 0):
            base = [bench, "-t", "1", "-n", str(ops)]
            tr = os.path.join(out_dir, "perf-%s-%d" % (name, ops))
            if name == "plain":
                cmd = base
            elif name == "memslope":
                cmd = [memslope, "record", "-o", tr + ".trace", "--"] + base
            elif name == "memslope-512K":
                cmd = [memslope, "record", "--sample-rate", "512K", "-o", tr + ".trace", "--"] + base
            else:
                cmd = [args.heaptrack, "-o", tr] + base
            vals.append(count(cmd, "perf-%s-%d" % (name, ops)))
        if None not in vals:
            out[name] = (vals[0] - vals[1]) / n
    for f in glob.glob(os.path.join(out_dir, "perf-*")):
        os.unlink(f)
    return out, None


def report_bench(args, memslope, bench, out_dir):
    """A trace of ten million allocations (and as many frees) over 50 sites;
    memslope report on it, text and JSON, median of 3, with peak RSS."""
    trace = os.path.join(out_dir, "report-10M.trace")
    n = args.report_allocs
    print("recording %d allocations over 50 sites..." % n, flush=True)
    rec = run([memslope, "record", "-o", trace, "--", bench, "-t", "1", "-n", str(n), "-s", "50"],
              out_dir, "report-record")
    if rec["status"] != 0:
        problem("report benchmark: record failed (%s/report-record.stderr)" % out_dir)
        return None
    doc = report_json(memslope, trace)
    out = {"allocations": doc["totals"]["allocations"], "frees": doc["totals"]["frees"],
           "record_wall": rec["wall"], "trace_bytes": os.path.getsize(trace),
           "sites": sum(len(c.get("sites", [])) for c in doc.get("cases", []))}
    for fmt in ("text", "json"):
        walls, rss = [], []
        for i in range(3):
            r = run([memslope, "report", "--format", fmt, trace], out_dir, "report-%s-%d" % (fmt, i))
            if r["status"] != 0:
                problem("memslope report --format %s failed" % fmt)
            walls.append(r["wall"])
            rss.append(r["maxrss_kib"])
        out[fmt] = {"wall": statistics.median(walls), "walls": walls, "maxrss_kib": max(rss)}
        print("  memslope report --format %-4s: median %.3f s of %s, peak RSS %d KiB"
              % (fmt, out[fmt]["wall"], ", ".join("%.3f" % w for w in walls), out[fmt]["maxrss_kib"]),
              flush=True)
    return out


def machine():
    model = "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    load = os.getloadavg()
    return {"nproc": os.cpu_count(), "cpu": model, "kernel": platform.release(),
            "loadavg_at_start": "%.2f %.2f %.2f" % load}


def snapshot(memslope, out_dir):
    """Copies memslope and its shim to out_dir/../snap, so that a rebuild in
    the tree during the run (other people at work) cannot change or break
    the build being measured. Returns the copied memslope."""
    src_shim = os.path.join(os.path.dirname(memslope), "..", "lib", "memslope", "libmemslope.so")
    snap = os.path.join(os.path.dirname(out_dir), "snap")
    dst = os.path.join(snap, "bin", "memslope")
    dst_shim = os.path.join(snap, "lib", "memslope", "libmemslope.so")
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    os.makedirs(os.path.dirname(dst_shim), exist_ok=True)
    for attempt in range(10):
        shutil.copy2(memslope, dst)
        shutil.copy2(src_shim, dst_shim)
        ok = subprocess.run([dst, "record", "-o", os.path.join(out_dir, "probe.trace"), "--", "true"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0
        if ok:
            return dst
        time.sleep(5)  # a rebuild in progress
    sys.exit("run.py: %s does not run (a rebuild in progress?)" % memslope)


def build_identity(memslope):
    import hashlib
    ident = {}
    try:
        ident["git"] = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                                      stdout=subprocess.PIPE, stderr=subprocess.DEVNULL).stdout.decode().strip()
        dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no",
                                "--", "preload", "tracer"],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL).stdout.decode().split("\n")
        ident["uncommitted"] = [l[3:] for l in dirty if l.strip()]
    except OSError:
        pass
    shim = os.path.join(os.path.dirname(memslope), "..", "lib", "memslope", "libmemslope.so")
    for name, path in (("memslope_sha256", memslope), ("shim_sha256", shim)):
        with open(path, "rb") as f:
            ident[name] = hashlib.sha256(f.read()).hexdigest()[:16]
    return ident


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--memslope", default=os.path.join(ROOT, "build/bin/memslope"))
    ap.add_argument("--bench", default=os.path.join(ROOT, "build/bench/malloc_bench"))
    ap.add_argument("--out", default=os.path.join(ROOT, "build/bench/out"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--ops", type=int, default=2000000, help="operations per thread (default 2000000)")
    ap.add_argument("--threads", default="1,2,8")
    ap.add_argument("--work", type=int, default=0,
                    help="malloc_bench -W: the program's own work per operation (default 0: allocation only)")
    ap.add_argument("--report-allocs", type=int, default=10000000)
    ap.add_argument("--memcheck-ops", type=int, default=100000)
    ap.add_argument("--no-heaptrack", action="store_true")
    ap.add_argument("--json", default=None, help="write every figure to this file")
    ap.add_argument("--no-snapshot", action="store_true",
                    help="run --memslope in place instead of a private copy")
    args = ap.parse_args()
    args.heaptrack = None if args.no_heaptrack else shutil.which("heaptrack")
    memslope, bench, out_dir = args.memslope, args.bench, args.out
    os.makedirs(out_dir, exist_ok=True)
    for f in glob.glob(os.path.join(out_dir, "*")):
        os.unlink(f)
    if not args.no_snapshot:
        memslope = snapshot(memslope, out_dir)
    ident = build_identity(memslope)

    probe = subprocess.run([memslope, "record", "--sample-rate", "512K", "-o",
                            os.path.join(out_dir, "probe.trace"), "--", "true"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    sample_ok = probe.returncode == 0

    m = machine()
    print("machine: nproc %s, %s, Linux %s, load average at start %s"
          % (m["nproc"], m["cpu"], m["kernel"], m["loadavg_at_start"]))
    print("memslope: %s (git %s%s; sha256 memslope %s, shim %s)"
          % (memslope, ident.get("git", "?"),
             ", uncommitted changes in " + " ".join(ident["uncommitted"]) if ident.get("uncommitted") else "",
             ident["memslope_sha256"], ident["shim_sha256"]))
    print("workload: malloc_bench -t T -n %d (per thread) -W %d, sizes 16-4096, 8 sites, working set 4096; "
          "%d rounds in turns; heaptrack %s; --sample-rate %s"
          % (args.ops, args.work, args.rounds, args.heaptrack or "not found",
             "accepted" if sample_ok else "not accepted"), flush=True)
    t_start = time.monotonic()
    results = {"machine": m, "build": ident, "ops": args.ops, "rounds": args.rounds, "threads": {}}
    for threads in [int(t) for t in args.threads.split(",")]:
        configs, res = overhead(args, memslope, bench, out_dir, threads, sample_ok)
        counts = count_check(args, memslope, bench, out_dir, threads, res["memslope"][-1])
        if sample_ok:
            counts["sampled_exact"] = sampled_count_check(memslope, threads, res["memslope-512K"][-1], counts)
        mc = memcheck_check(args, memslope, bench, out_dir, threads)
        rss = tracer_rss(args, memslope, bench, out_dir, threads, sample_ok)
        tr = {"configs": {}, "counts": counts, "memcheck": mc, "rss": rss}
        pw = statistics.median(r["wall"] for r in res["plain"])
        pc = statistics.median(r["cpu"] for r in res["plain"])
        for name, _, _ in configs:
            w = statistics.median(r["wall"] for r in res[name])
            c = statistics.median(r["cpu"] for r in res[name])
            paired = statistics.median(r["wall"] / p["wall"] for r, p in zip(res[name], res["plain"]))
            tr["configs"][name] = {
                "walls": [r["wall"] for r in res[name]], "cpus": [r["cpu"] for r in res[name]],
                "wall": w, "cpu": c, "wall_ratio": w / pw, "cpu_ratio": c / pc,
                "paired_wall_ratio": paired,
                "trace_bytes": res[name][-1]["trace_bytes"],
                "maxrss_tree_kib": max(r["maxrss_kib"] for r in res[name])}
        results["threads"][threads] = tr

    perf, why = perf_instructions(args, memslope, bench, out_dir, sample_ok)
    results["perf_instructions_per_pair"] = perf
    results["perf_note"] = why
    results["report"] = report_bench(args, memslope, bench, out_dir)
    results["elapsed"] = time.monotonic() - t_start

    # --- summary ---
    print()
    print("=" * 100)
    print("Overhead, median of %d rounds in turns; x plain = median / median of plain;" % args.rounds)
    print("paired = median over rounds of (this run's wall / the same round's plain wall)")
    print("(wall = elapsed; cpu = user+sys of the whole process tree; tracer rss = peak of the")
    print(" tracer's own processes, target rss = the benchmark's, both VmHWM polled in one extra run)")
    for threads, tr in results["threads"].items():
        print()
        print("threads=%d, %d ops/thread, -W %d" % (threads, args.ops, args.work))
        print("  %-14s %9s %8s %8s %9s %8s %12s %12s %12s" % ("", "wall s", "x plain", "paired", "cpu s",
                                                                "x plain", "trace", "tracer rss", "target rss"))
        for name, c in tr["configs"].items():
            r = tr["rss"].get(name, {})
            print("  %-14s %9.3f %8.2f %8.2f %9.3f %8.2f %12s %12s %12s"
                  % (name, c["wall"], c["wall_ratio"], c["paired_wall_ratio"], c["cpu"], c["cpu_ratio"],
                     fmt_bytes(c["trace_bytes"]) if c["trace_bytes"] else "-",
                     fmt_bytes(r["tracer_kib"] * 1024) if r.get("tracer_kib") else "-",
                     fmt_bytes(r["target_kib"] * 1024) if r.get("target_kib") else "-"))
        ms = tr["configs"]["memslope"]["wall_ratio"]
        bar = BARS.get(threads)
        verdicts = []
        if bar:
            verdicts.append("memslope/plain %.2f %s %.1f: %s" % (ms, "<=" if ms <= bar else ">", bar,
                                                                "MEETS" if ms <= bar else "MISSES"))
        if "heaptrack" in tr["configs"]:
            ht = tr["configs"]["heaptrack"]["wall_ratio"]
            rel = ms / ht
            verdicts.append("memslope ratio / heaptrack ratio = %.2f / %.2f = %.2f %s %.1f: %s"
                            % (ms, ht, rel, "<=" if rel <= HEAPTRACK_FRACTION else ">",
                               HEAPTRACK_FRACTION, "MEETS" if rel <= HEAPTRACK_FRACTION else "MISSES"))
            tr["memslope_over_heaptrack"] = rel
        if "memslope-512K" in tr["configs"]:
            sr = tr["configs"]["memslope-512K"]["wall_ratio"]
            floors = ", ".join("%s %.2f" % (what, tr["configs"][name]["wall_ratio"])
                               for name, what in (("shim-only", "interposition alone, shim-only"),
                                                  ("held-floor", "a per-thread set alone, held-floor"))
                               if name in tr["configs"])
            sbar = sampled_bar(args.work)
            if sbar is None:
                verdicts.append("memslope-512K/plain %.2f (no bar at -W %d)" % (sr, args.work))
            else:
                verdicts.append("memslope-512K/plain %.2f %s %.2f: %s%s"
                                % (sr, "<=" if sr <= sbar else ">", sbar, "MEETS" if sr <= sbar else "MISSES",
                                   " (%s)" % floors if floors else ""))
        for v in verdicts:
            print("  bar: " + v)
        print("  counts: %s" % ("exact" if tr["counts"]["exact"] else "MISMATCH"),
              "| sampled counts: %s" % {None: "n/a", True: "exact", False: "MISMATCH"}[
                  tr["counts"].get("sampled_exact")],
              "| memcheck: %s" % ("n/a" if not tr["memcheck"] else
                                  "equal" if tr["memcheck"]["equal"] else "DIFFERENT"))
    print()
    if perf:
        print("instructions per malloc/free pair (perf stat, 1 thread): " +
              ", ".join("%s %.0f" % kv for kv in perf.items()))
    else:
        print("instructions per malloc/free pair: skipped (%s)" % why)
    rb = results["report"]
    if rb:
        print("report benchmark: trace of %d allocations, %d frees, %d sites, %s (recorded in %.1f s); "
              "memslope report: text %.3f s (peak RSS %s), json %.3f s (peak RSS %s)"
              % (rb["allocations"], rb["frees"], rb["sites"], fmt_bytes(rb["trace_bytes"]), rb["record_wall"],
                 rb["text"]["wall"], fmt_bytes(rb["text"]["maxrss_kib"] * 1024),
                 rb["json"]["wall"], fmt_bytes(rb["json"]["maxrss_kib"] * 1024)))
    print("load average at end: %.2f %.2f %.2f; elapsed %.0f s" % (os.getloadavg() + (results["elapsed"],)))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1, default=str)
    if problems:
        print("\n%d problem(s):" % len(problems))
        for p in problems:
            print("  " + p)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
