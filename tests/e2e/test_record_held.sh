#!/bin/sh
# With --sample-rate and two or more threads recording, the figures that
# do not need a backtrace stay exact (fixtures/held_threads.c): totals
# (allocations, frees, allocated bytes), live at exit, the four leak
# categories at exit, each case's iterations, setup, growth and leaks, and
# the same for a fork child. The fixture churns ~220 MB of small blocks on
# several threads, so at --sample-rate 1G next to nothing is sampled and at
# 512K a few hundred allocations are; whatever the shim keeps of the
# unsampled blocks (a held set per thread), every such figure must equal
# that of the run without sampling, and the fixture's own numbers:
#
#   threads: blocks freed by another thread (W0 -> W1, main -> W0), and
#            blocks allocated after those frees at what may be the same
#            addresses, a thread that ends owning lost and reachable
#            blocks, leaks and reachable blocks on every thread
#   case:    a case run beside a second live thread, whose pre-case blocks
#            (allocated while nothing is open) are freed inside it, and a
#            pre-case leak that is not the case's
#   fork:    a child that inherits every thread's live blocks, frees some,
#            drops some, allocates its own
#
# The threaded recordings are repeated (the races between threads are
# timing dependent), and the leak figures are checked against memcheck's
# when valgrind is installed. The peak is not compared: with unsampled
# blocks kept in the threads it may become a bound rather than an exact
# figure (docs/internals.md, "a shim-side live set for sampled runs").
. "$(dirname "$0")/lib.sh"
need_memslope
need_fixture held_threads
need_python

F=held_threads.c
# Sampled recordings of each mode at each rate.
REPEATS=${HELD_REPEATS:-3}

# exact_parts JSON: the figures sampling must not change, one per line
# (processes sorted: their order is not part of the figures).
exact_parts() {
    "$PY" - "$1" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
def totals(t):
    return {k: t[k] for k in ("allocations", "frees", "allocated_bytes")}
print("totals", json.dumps(totals(d["totals"]), sort_keys=True))
print("leaks_at_exit", json.dumps(d.get("leaks_at_exit"), sort_keys=True))
for c in d["cases"]:
    print("case", c["name"], json.dumps({k: c.get(k) for k in ("iterations", "setup", "growth", "leaks")},
                                        sort_keys=True))
lines = []
for p in d["processes"]:
    lines.append("process " + json.dumps({"primary": p["primary"], "exit": p.get("exit"), "totals": totals(p["totals"]),
                                          "live_at_exit": p.get("live_at_exit"),
                                          "leaks_at_exit": p.get("leaks_at_exit")}, sort_keys=True))
print("\n".join(sorted(lines)))
EOF
}

# figures JSON PREFIX: "allocations frees bytes live_blocks live_bytes
# lost_blocks lost_bytes indirect_blocks possible_blocks reachable_blocks
# reachable_bytes" of the process image at PREFIX (a python path).
figures() {
    jget "$1" "' '.join(str(x) for x in [${2}['totals']['allocations'], ${2}['totals']['frees'], ${2}['totals']['allocated_bytes'], ${2}['live_at_exit']['blocks'], ${2}['live_at_exit']['bytes'], ${2}['leaks_at_exit']['definitely_lost']['blocks'], ${2}['leaks_at_exit']['definitely_lost']['bytes'], ${2}['leaks_at_exit']['indirectly_lost']['blocks'], ${2}['leaks_at_exit']['possibly_lost']['blocks'], ${2}['leaks_at_exit']['still_reachable']['blocks'], ${2}['leaks_at_exit']['still_reachable']['bytes']])"
}
PRIMARY='[p for p in d["processes"] if p["primary"]][0]'
CHILD='[p for p in d["processes"] if not p["primary"]][0]'
HELD='[c for c in d["cases"] if c["name"] == "held"][0]'

rate_bytes() {
    case $1 in
        *G) echo $((${1%G} << 30)) ;;
        *K) echo $((${1%K} << 10)) ;;
    esac
}

# record_mode MODE: the run without sampling ($WORK/MODE-all.json), then
# REPEATS runs at each rate, each compared with it.
record_mode() {
    record_and_report "$1-all" -- "$FIXTURES/held_threads" "$1"
    expect_eq "$1: record exit status" 0 "$REC_RC"
    expect_eq "$1: no sampling object without --sample-rate" MISSING "$(jget "$WORK/$1-all.json" 'd["sampling"]')"
    exact_parts "$WORK/$1-all.json" >"$WORK/$1-all.exact"
    for rate in 1G 512K; do
        run=1
        while [ "$run" -le "$REPEATS" ]; do
            name=$1-$rate-$run
            record_and_report "$name" --sample-rate "$rate" -- "$FIXTURES/held_threads" "$1"
            expect_eq "$name: record exit status" 0 "$REC_RC"
            expect_eq "$name: sampled every $rate" "$(rate_bytes "$rate")" \
                "$(jget "$WORK/$name.json" 'd["sampling"]["mean_interval_bytes"]')"
            exact_parts "$WORK/$name.json" >"$WORK/$name.exact"
            if cmp -s "$WORK/$1-all.exact" "$WORK/$name.exact"; then
                log "ok       $name: totals, leaks, cases and processes equal the run without sampling"
            else
                log "  without sampling (<) against --sample-rate $rate (>):"
                diff "$WORK/$1-all.exact" "$WORK/$name.exact" | sed 's/^/    /'
                expect_eq "$name: exact figures as without sampling" same differ
            fi
            run=$((run + 1))
        done
    done
}

# The TLS vector (DTV) glibc allocates for each thread it creates, freed by
# glibc's freeres at exit: its size depends on the modules with TLS loaded,
# the shim's among them (lib.sh: expect_vg_totals), so it is read from the
# report. held_threads itself allocates nothing else beside its blocks.
record_mode threads
J=$WORK/threads-all.json
dtv=$(jget "$J" 'sum(s["allocated_bytes"] for s in d["cases"][0]["sites"] if any(f.get("function") == "allocate_dtv" for f in s["frames"]))')
expect_eq "threads: 3 TLS vectors (pthread_create's allocate_dtv)" 3 \
    "$(jget "$J" 'sum(s["allocations"] for s in d["cases"][0]["sites"] if any(f.get("function") == "allocate_dtv" for f in s["frames"]))')"
case "$dtv" in
    ''|*[!0-9]*) fail "cannot read the TLS vectors' bytes: '$dtv'" ;;
esac
dtv=$((dtv / 3))
log "  a TLS vector is $dtv bytes"

# threads: the fixture's own 426,927 allocations (400,000 + 19,200 churned,
# 6,400 handed off, 1,280 given, 47 leaked or kept), 426,880 frees and
# 221,981,720 bytes (425,280 sized blocks x 520 B + 4,120 B leaked or kept),
# and 3 TLS vectors; at exit 47 blocks (4,120 B) live: 27 (480 + 672 + 192 +
# 384 = 1,728 B) definitely lost, 20 (480 + 800 + 600 + 512 = 2,392 B) still
# reachable.
expect_eq "threads: allocations frees bytes live(blocks bytes) lost(blocks bytes) indirect possibly reachable(blocks bytes)" \
    "$((426927 + 3)) $((426880 + 3)) $((221981720 + 3 * dtv)) 47 4120 27 1728 0 0 20 2392" "$(figures "$J" "$PRIMARY")"
expect_site "$J" worker_leaks_and_keeps "$(fixture_line $F HELD-LEAK)" allocations=10 leaked_blocks=10 leaked_bytes=480
expect_site "$J" worker_leaks_and_keeps "$(fixture_line $F HELD-KEEP)" allocations=6 live_bytes=480 leaked_blocks=0
expect_site "$J" ending_leaks_and_keeps "$(fixture_line $F HELD-END-LEAK)" allocations=6 leaked_blocks=6 leaked_bytes=672
expect_site "$J" ending_leaks_and_keeps "$(fixture_line $F HELD-END-KEEP)" allocations=4 live_bytes=800 leaked_blocks=0
expect_site "$J" main_leaks_and_keeps "$(fixture_line $F HELD-MAIN-LEAK)" allocations=3 leaked_blocks=3 leaked_bytes=192
expect_site "$J" main_leaks_and_keeps "$(fixture_line $F HELD-MAIN-KEEP)" allocations=2 live_bytes=600 leaked_blocks=0
expect_site "$J" late_leaks_and_keeps "$(fixture_line $F HELD-LATE-LEAK)" allocations=8 leaked_blocks=8 leaked_bytes=384
expect_site "$J" late_leaks_and_keeps "$(fixture_line $F HELD-LATE-KEEP)" allocations=8 live_bytes=512 leaked_blocks=0
expect_site "$J" churn "$(fixture_line $F HELD-CHURN)" allocations=419200 allocated_bytes=217984000 live_bytes=0
expect_site "$J" churn "$(fixture_line $F HELD-HANDOFF)" allocations=6400 allocated_bytes=3328000 live_bytes=0
expect_site "$J" main_gives "$(fixture_line $F HELD-MAIN-GIVE)" allocations=1280 allocated_bytes=665600 live_bytes=0

# case: the fixture's own 225,368 allocations (4 x 51,200 churned, 2 x 20 x
# 512 temporaries, 47 before the case, 1 setup, 40 leaked in it), 225,326
# frees, 117,151,464 bytes (225,280 x 520 B + 3,264 + 1,000 + 1,600 B) and
# 1 TLS vector; at exit the 2 pre-case and 40 case blocks lost (1,664 B).
record_mode case
J=$WORK/case-all.json
expect_eq "case: allocations frees bytes live(blocks bytes) lost(blocks bytes) indirect possibly reachable(blocks bytes)" \
    "$((225368 + 1)) $((225326 + 1)) $((117151464 + dtv)) 42 1664 42 1664 0 0 0 0" "$(figures "$J" "$PRIMARY")"
expect_eq "case: the cases" '["held"]' "$(jget "$J" '[c["name"] for c in d["cases"]]')"
# 20 iterations; 1,000 B set up in 1 block before the first; per iteration
# 48 + 32 B dropped and 2 x 16 B pre-case blocks freed: 48 B, 0 blocks.
expect_eq "case held: iterations" 20 "$(jget "$J" "${HELD}['iterations']")"
expect_eq "case held: setup" '{"blocks": 1, "bytes": 1000}' "$(jget "$J" "${HELD}['setup']")"
expect_eq "case held: growth" '{"blocks_per_iteration": 0.0, "bytes_per_iteration": 48.0}' "$(jget "$J" "${HELD}['growth']")"
expect_eq "case held: definitely lost (20 x 48 + 20 x 32 B; not the 2 pre-case blocks)" '{"blocks": 40, "bytes": 1600}' \
    "$(jget "$J" "${HELD}['leaks']['definitely_lost']")"
expect_eq "case held: still reachable (the setup block)" '{"blocks": 1, "bytes": 1000}' \
    "$(jget "$J" "${HELD}['leaks']['still_reachable']")"
expect_eq "case held: indirectly and possibly lost" "0 0" \
    "$(jget "$J" "' '.join(str(${HELD}['leaks'][k]['blocks']) for k in ('indirectly_lost', 'possibly_lost'))")"
expect_site "$J" main_iteration "$(fixture_line $F HELD-CASE-LEAK-MAIN)" allocations=20 leaked_blocks=20 leaked_bytes=960
expect_site "$J" worker_iteration "$(fixture_line $F HELD-CASE-LEAK-WORKER)" allocations=20 leaked_blocks=20 leaked_bytes=640
expect_site "$J" main_setup "$(fixture_line $F HELD-SETUP)" allocations=1 live_bytes=1000
expect_site "$J" churn "$(fixture_line $F HELD-CHURN)" allocations=20480 allocated_bytes=10649600 live_bytes=0
# Blocks allocated before the case are not the case's: the pre-case blocks
# freed one an iteration are shrinking sites, the pre-case leak no leak of
# the case's.
expect_site "$J" main_pre_case "$(fixture_line $F HELD-PRE-MAIN)" allocations=0 live_bytes=0 growth_bytes_per_iteration=-16
expect_site "$J" worker_pre_case "$(fixture_line $F HELD-PRE-WORKER)" allocations=0 live_bytes=0 growth_bytes_per_iteration=-16
expect_site "$J" main_pre_case "$(fixture_line $F HELD-PRE-LEAK)" allocations=0 leaked_blocks=0

# fork: the parent's own 77,050 allocations and frees (3 x 25,600 churned,
# 250 kept until the child is done), 39,992,125 bytes (76,800 x 520 B +
# 14,950 + 24,950 + 16,225 B), and 2 TLS vectors; nothing left at exit.
# The child: 30 allocations, 1,860 B; 125 frees of inherited blocks and the
# 2 inherited TLS vectors (freeres at its exit); 155 blocks (32,735 B) live
# at exit: 45 (4,050 + 2,545 + 320 = 6,915 B) definitely lost, 110 (4,675 +
# 11,180 + 8,425 + 1,540 = 25,820 B) still reachable.
record_mode fork
J=$WORK/fork-all.json
expect_eq "fork: processes" 2 "$(jget "$J" 'len(d["processes"])')"
expect_eq "fork parent: allocations frees bytes live(blocks bytes) lost(blocks bytes) indirect possibly reachable(blocks bytes)" \
    "$((77050 + 2)) $((77050 + 2)) $((39992125 + 2 * dtv)) 0 0 0 0 0 0 0 0" "$(figures "$J" "$PRIMARY")"
expect_eq "fork child: allocations frees bytes live(blocks bytes) lost(blocks bytes) indirect possibly reachable(blocks bytes)" \
    "30 $((125 + 2)) 1860 155 32735 45 6915 0 0 110 25820" "$(figures "$J" "$CHILD")"
expect_eq "fork: exits (child, parent)" '[{"status": 0}, {"status": 0}]' \
    "$(jget "$J" "[${CHILD}['exit'], ${PRIMARY}['exit']]")"
expect_site "$J" worker_fork_blocks "$(fixture_line $F HELD-FORK-WORKER)" allocations=200 allocated_bytes=39900 live_bytes=0
expect_site "$J" main_fork_blocks "$(fixture_line $F HELD-FORK-MAIN)" allocations=50 allocated_bytes=16225 live_bytes=0

# memcheck: the same leaks, and the same totals but for the TLS vectors,
# larger under memslope by the shim's modules with TLS (lib.sh:
# expect_vg_totals, which reads the vectors from cases[0]: the case mode's
# is the named case, without them).
# expect_vg_leaks JSON PREFIX WHAT: the leak categories of the image at PREFIX.
expect_vg_leaks() {
    expect_eq "$3: lost(blocks bytes) indirect possibly reachable(blocks bytes) = memcheck's" \
        "$VG_DEF_BLOCKS $VG_DEF_BYTES $VG_IND_BLOCKS $VG_POS_BLOCKS $VG_REACH_BLOCKS $VG_REACH_BYTES" \
        "$(jget "$1" "' '.join(str(x) for x in [${2}['leaks_at_exit']['definitely_lost']['blocks'], ${2}['leaks_at_exit']['definitely_lost']['bytes'], ${2}['leaks_at_exit']['indirectly_lost']['blocks'], ${2}['leaks_at_exit']['possibly_lost']['blocks'], ${2}['leaks_at_exit']['still_reachable']['blocks'], ${2}['leaks_at_exit']['still_reachable']['bytes']])")"
}
# expect_vg_sums JSON PREFIX THREADS WHAT: allocations, frees, bytes.
expect_vg_sums() {
    _tls=$(shim_tls_modules)
    expect_eq "$4: allocations frees bytes = memcheck's (bytes + $3 TLS vectors x $_tls shim modules x 16 B)" \
        "$VG_ALLOCS $VG_FREES $((VG_BYTES + $3 * _tls * 16))" \
        "$(jget "$1" "' '.join(str(${2}['totals'][k]) for k in ('allocations', 'frees', 'allocated_bytes'))")"
}
if command -v valgrind >/dev/null 2>&1; then
    for mode in threads case; do
        vg_run "$mode" -- "$FIXTURES/held_threads" "$mode"
        vg_totals "$(vg_log "$mode")"
        expect_vg_leaks "$WORK/$mode-all.json" "$PRIMARY" "$mode"
        [ "$mode" = threads ] && threads=3 || threads=1
        expect_vg_sums "$WORK/$mode-all.json" "$PRIMARY" "$threads" "$mode"
    done
    vg_run fork -- "$FIXTURES/held_threads" fork
    # One log per process; the child's names the parent's pid as its parent.
    for l in "$WORK"/vg.fork.*.log; do
        pid=${l%.log}
        pid=${pid##*.}
        if grep -q "Parent PID: $pid\$" "$WORK"/vg.fork.*.log; then
            vg_totals "$l"
            expect_vg_sums "$WORK/fork-all.json" "$PRIMARY" 2 "fork parent"
            expect_vg_leaks "$WORK/fork-all.json" "$PRIMARY" "fork parent"
        else
            # memcheck's totals in a child go on from its parent's: not compared.
            vg_totals "$l"
            expect_vg_leaks "$WORK/fork-all.json" "$CHILD" "fork child"
        fi
    done
else
    log "valgrind not installed: the cross-check with memcheck is skipped"
fi
finish
