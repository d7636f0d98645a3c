#!/bin/sh
# Leak-scan benchmark (not a timed test). From the repository root:
#   sh bench/leakscan/run.sh [BLOCKS [SIZE]]      default 4000000 x 256 (1 GiB)
# 1. memslope leaks PID on heap_graph's ~1 GiB heap: heap walk and scan time,
#    scan rate (bytes scanned / scan seconds).
# 2. The same at 1/64 of the size, and memcheck's leak check on that small
#    heap: (valgrind --leak-check=full) - (valgrind --leak-check=no) run time.
# 0. First, the classification alone on a synthetic in-memory heap (no
#    ptrace, no copying): the algorithm's own rate.
# 3. An untouched 4 GiB block (untouched_block.c) under `memslope record` and
#    `memslope leaks PID`: time and memory, against the target's own RSS.
# On a busy machine wall time is inflated; the CPU figures are memslope's own.
set -eu
cd "$(dirname "$0")/../.."
MEMSLOPE=${MEMSLOPE:-build/bin/memslope}
BLOCKS=${1:-4000000}
SIZE=${2:-256}
OUT=${TMPDIR:-/tmp}/memslope-bench-leakscan
mkdir -p "$OUT"
cc -O2 -o "$OUT/heap_graph" bench/leakscan/heap_graph.c

# scan BLOCKS SIZE: starts heap_graph, scans it with memslope leaks, prints
# the figures, releases it.
scan() {
    rm -f "$OUT/in"
    mkfifo "$OUT/in"
    "$OUT/heap_graph" "$1" "$2" wait <"$OUT/in" >"$OUT/ready" &
    child=$!
    exec 3>"$OUT/in"
    while ! grep -q ready "$OUT/ready" 2>/dev/null; do sleep 0.2; done
    rss=$(awk '/^VmRSS/{print $2}' "/proc/$child/status")
    start=$(date +%s.%N)
    "$MEMSLOPE" leaks --format json "$child" >"$OUT/leaks.json"
    end=$(date +%s.%N)
    exec 3>&-
    wait "$child"
    python3 - "$OUT/leaks.json" "$1" "$2" "$rss" "$start" "$end" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); s = d["scan"]
blocks, size, rss = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
wall = float(sys.argv[6]) - float(sys.argv[5])
scanned = s["root_bytes"] + s["block_bytes"]
print("heap_graph %d x %d B (RSS %.0f MiB): %d heap blocks found" % (blocks, size, rss / 1024, s["heap_blocks"]))
print("  heap walk %.3f s (CPU %.3f s), scan %.3f s (CPU %.3f s) of %.1f MiB (roots %.1f MiB, blocks %.1f MiB): "
      "%.2f GB/s wall, %.2f GB/s CPU; whole command %.3f s"
      % (s["heap_walk_seconds"], s["heap_walk_cpu_seconds"], s["scan_seconds"], s["scan_cpu_seconds"],
         scanned / 2**20, s["root_bytes"] / 2**20, s["block_bytes"] / 2**20, s["scan_gb_per_second"],
         s["scan_gb_per_cpu_second"], wall))
print("  categories: " + ", ".join("%s %d blocks" % (k, v["blocks"]) for k, v in d["leaks"].items()))
PY
}

echo "== the classification alone, on a synthetic heap in memory (CPU time)"
cc -O2 -D_GNU_SOURCE -o "$OUT/classify_bench" bench/leakscan/classify_bench.c leakscan/classify.c common/error_buffer.c
"$OUT/classify_bench" "$BLOCKS" "$SIZE" 4
"$OUT/classify_bench" "$((BLOCKS / 4))" "$((SIZE * 4))" 32
echo "== memslope leaks, full size"
scan "$BLOCKS" "$SIZE"
SMALL=$((BLOCKS / 64))
echo "== memslope leaks, 1/64 size"
scan "$SMALL" "$SIZE"
if command -v valgrind >/dev/null 2>&1; then
    echo "== memcheck, 1/64 size (leak check time = full - no)"
    t0=$(date +%s.%N)
    valgrind -q --leak-check=no --run-libc-freeres=no "$OUT/heap_graph" "$SMALL" "$SIZE" exit >/dev/null 2>&1
    t1=$(date +%s.%N)
    valgrind --leak-check=full --run-libc-freeres=no --log-file="$OUT/vg.log" "$OUT/heap_graph" "$SMALL" "$SIZE" exit >/dev/null 2>&1
    t2=$(date +%s.%N)
    python3 -c "import sys; a,b,c=map(float,sys.argv[1:]); print('  valgrind --leak-check=no %.2f s, full %.2f s: leak check about %.2f s' % (b-a, c-b, (c-b)-(b-a)))" "$t0" "$t1" "$t2"
    grep -E "definitely lost:|indirectly lost:|possibly lost:|still reachable:" "$OUT/vg.log" | sed 's/==[0-9]*== */  memcheck /'
fi

echo "== an untouched 4 GiB block: record and leaks PID"
cc -O2 -o "$OUT/untouched_block" bench/leakscan/untouched_block.c
/usr/bin/time -f "  plain: %e s, peak RSS %M KiB" "$OUT/untouched_block" 4 exit
/usr/bin/time -f "  memslope record: %e s, memslope's peak RSS %M KiB (largest of its processes)" \
    "$MEMSLOPE" record --quiet -o "$OUT/untouched.trace" -- "$OUT/untouched_block" 4 exit
rm -f "$OUT/in"
mkfifo "$OUT/in"
"$OUT/untouched_block" 4 wait <"$OUT/in" >"$OUT/ready" &
child=$!
exec 3>"$OUT/in"
while ! grep -q ready "$OUT/ready" 2>/dev/null; do sleep 0.2; done
for run in 1 2; do
    /usr/bin/time -f "  memslope leaks PID (run $run): %e s, peak RSS %M KiB" \
        "$MEMSLOPE" leaks --format json "$child" >"$OUT/untouched.json"
    python3 -c "import json,sys; s=json.load(open(sys.argv[1]))['scan']; print('    blocks %.0f MiB, of which untouched %.0f MiB; scan %.3f s' % (s['block_bytes']/2**20, s['untouched_bytes']/2**20, s['scan_seconds']))" "$OUT/untouched.json"
done
echo "  target RSS after the scans: $(awk '/^VmRSS/{print $2, $3}' "/proc/$child/status"), page tables $(awk '/^VmPTE/{print $2, $3}' "/proc/$child/status")"
exec 3>&-
wait "$child"
