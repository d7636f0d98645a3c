#!/bin/sh
# --sample-rate keeps every figure that is not per site exact: totals, the
# leak summary at exit and each case's iterations, setup, growth and leaks
# equal those of a run with every backtrace (demo_leak, leak_cycle,
# growth_cases), in every process (fork_inherit: a child that inherits 200
# live blocks, their sites and the sites' estimates). Per-site figures are estimates scaled from the samples,
# marked as such in JSON ("sampling") and text ("~"), and near the truth:
# demo_leak's 100 lost blocks of 48 B, sampled every 64 B on average, are
# each sampled with probability 1 - exp(-48/64) = 0.53, so the estimate's
# standard deviation is about 9 blocks; the test allows 4 of them (a false
# failure once in ~16,000 runs), which an unscaled count (53 +- 5) misses.
. "$(dirname "$0")/lib.sh"
need_memslope
need_fixture demo_leak leak_cycle growth_cases fork_inherit
need_python

# exact_parts JSON: the figures sampling must not change, one per line.
exact_parts() {
    "$PY" - "$1" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
print("totals", json.dumps(d["totals"], sort_keys=True))
print("leaks_at_exit", json.dumps(d.get("leaks_at_exit"), sort_keys=True))
for c in d["cases"]:
    print("case", c["name"], json.dumps({k: c.get(k) for k in
          ("iterations", "setup", "growth", "leaks", "peak_bytes")}, sort_keys=True))
for p in d["processes"]:
    print("process", json.dumps({k: p.get(k) for k in ("exit", "totals", "live_at_exit", "leaks_at_exit")},
                                sort_keys=True))
EOF
}

for f in demo_leak leak_cycle growth_cases fork_inherit; do
    record_and_report "$f-all" -- "$FIXTURES/$f"
    expect_eq "$f record exit status" 0 "$REC_RC"
    record_and_report "$f-sampled" --sample-rate 64 -- "$FIXTURES/$f"
    expect_eq "$f --sample-rate 64 record exit status" 0 "$REC_RC"
    exact_parts "$WORK/$f-all.json" >"$WORK/$f-all.exact"
    exact_parts "$WORK/$f-sampled.json" >"$WORK/$f-sampled.exact"
    if cmp -s "$WORK/$f-all.exact" "$WORK/$f-sampled.exact"; then
        log "  $f: totals, leaks and cases equal with and without sampling ($(wc -l <"$WORK/$f-all.exact") lines)"
    else
        diff "$WORK/$f-all.exact" "$WORK/$f-sampled.exact" | sed 's/^/    /'
        fail "$f: --sample-rate changed figures that must stay exact"
    fi
    expect_eq "$f: no sampling object without --sample-rate" MISSING "$(jget "$WORK/$f-all.json" 'd["sampling"]')"
    expect_eq "$f: sampling object" '{"mean_interval_bytes": 64, "site_figures": "estimated"}' \
        "$(jget "$WORK/$f-sampled.json" 'd["sampling"]')"
done

# The fixtures' own figures, as a reminder of what "exact" means here.
expect_eq "fork_inherit child (sampled): totals, live at exit, lost and reachable blocks" \
    "20 100 1540 120 26490 50 70" \
    "$(jget "$WORK/fork_inherit-sampled.json" '" ".join(str(x) for x in [(p["totals"]["allocations"], p["totals"]["frees"], p["totals"]["allocated_bytes"], p["live_at_exit"]["blocks"], p["live_at_exit"]["bytes"], p["leaks_at_exit"]["definitely_lost"]["blocks"], p["leaks_at_exit"]["still_reachable"]["blocks"]) for p in d["processes"] if not p["primary"]][0])')"
expect_eq "demo_leak definitely lost bytes (sampled)" 4800 \
    "$(jget "$WORK/demo_leak-sampled.json" 'd["leaks_at_exit"]["definitely_lost"]["bytes"]')"
expect_eq "demo_leak allocations (sampled)" 217 "$(jget "$WORK/demo_leak-sampled.json" 'd["totals"]["allocations"]')"

LEAK=$(fixture_line demo_leak.c DEMO-LEAK)
blocks=$(site_get "$WORK/demo_leak-sampled.json" leaked_blocks leaky_site "$LEAK")
bytes=$(site_get "$WORK/demo_leak-sampled.json" leaked_bytes leaky_site "$LEAK")
log "  demo_leak leaky_site estimated: $bytes bytes in $blocks blocks (true: 4800 in 100)"
# expect_lt LABEL LIMIT VALUE checks VALUE < LIMIT
expect_lt "63 (100 - 4 sd) below the estimated lost blocks" "$blocks" 63
expect_lt "estimated lost blocks below 137 (100 + 4 sd)" 137 "$blocks"
expect_lt "3032 (4800 - 4 sd) below the estimated lost bytes" "$bytes" 3032
expect_lt "estimated lost bytes below 6568 (4800 + 4 sd)" 6568 "$bytes"

log "\$ memslope report $WORK/demo_leak-sampled.trace"
"$MEMSLOPE" report "$WORK/demo_leak-sampled.trace" >"$WORK/sampled.txt" 2>&1 || fail "text report failed"
expect_match "text report explains the estimates" "estimated from allocations sampled every 64 B" "$WORK/sampled.txt"
expect_match "loss record marked as an estimate" "^~[0-9,]* bytes in ~[0-9,]* blocks are definitely lost" "$WORK/sampled.txt"
expect_match "leak summary exact" "definitely lost: 4,800 bytes in 100 blocks" "$WORK/sampled.txt"

log "\$ memslope gate $WORK/demo_leak-sampled.trace --max-leaked 0"
"$MEMSLOPE" gate "$WORK/demo_leak-sampled.trace" --max-leaked 0 >"$WORK/gate.txt" 2>&1
expect_eq "gate exit status (4,800 B leaked, exact)" 1 "$?"
expect_match "gate: the exact case figure, the top site's estimate marked" \
    "leaked 4.7 KiB > limit 0 B; top site leaky_site .*\(~[0-9]+ bytes in ~[0-9]+ blocks\)" "$WORK/gate.txt"

# At a rate far above the program's whole allocation volume nothing is
# sampled: the figures stay exact, and the reports say no site was sampled.
record_and_report demo_leak-none --sample-rate 1G -- "$FIXTURES/demo_leak"
expect_eq "1G: definitely lost bytes still exact" 4800 \
    "$(jget "$WORK/demo_leak-none.json" 'd["leaks_at_exit"]["definitely_lost"]["bytes"]')"
"$MEMSLOPE" report "$WORK/demo_leak-none.trace" >"$WORK/none.txt" 2>&1
expect_match "1G: text says no lost block was sampled" "^No lost block was sampled" "$WORK/none.txt"
"$MEMSLOPE" gate "$WORK/demo_leak-none.trace" --max-leaked 0 >"$WORK/gate-none.txt" 2>&1
expect_match "1G: gate names no site" "top site none sampled" "$WORK/gate-none.txt"
finish
