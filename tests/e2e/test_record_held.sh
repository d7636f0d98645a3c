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
#   raw_exit:  a thread that leaves by the exit system call (no pthread
#            destructor: its set is taken at its exit stop) holding 8,960
#            blocks, which another thread is freeing meanwhile
#   main_exit: main leaves by pthread_exit; then two workers drop and keep
#            blocks, one ends, the other calls exit() holding its set
#   fork_end:  a worker holding 12,032 blocks ends (its set sent by its
#            destructor) as main forks, twice
#   exec:    main execs while it and a second thread hold blocks: the first
#            image's live figures at the exec (a process image of its own
#            in the report, "execed")
#
# The threaded recordings are repeated (the races between threads are
# timing dependent), and the leak figures are checked against memcheck's
# when valgrind is installed (not exec's: memcheck reports nothing for an
# image an exec replaces). The peak is not compared: with unsampled
# blocks kept in the threads it may become a bound rather than an exact
# figure (docs/internals.md, "a shim-side live set for sampled runs").
. "$(dirname "$0")/lib.sh"
need_memslope
need_fixture held_threads
# Threads hold their blocks only while the tracer sees them allocate fast
# enough (hold_wanted); the fixture's phases are too short to be sure of
# that, so holding is forced: what is tested is what holding may do.
export MEMSLOPE_HOLD=always
need_python

F=held_threads.c
# Sampled recordings of threads, case and fork at each rate.
REPEATS=${HELD_REPEATS:-3}

# parts JSON OUT: writes the figures sampling must not change into OUT, one
# per line (processes sorted: their order is not part of the figures), and
# prints the sampling's mean interval (MISSING without one). One python run
# a recording: each costs a fifth of a second or more.
parts() {
    "$PY" - "$1" "$2" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
def totals(t):
    return {k: t[k] for k in ("allocations", "frees", "allocated_bytes")}
out = ["totals " + json.dumps(totals(d["totals"]), sort_keys=True),
       "leaks_at_exit " + json.dumps(d.get("leaks_at_exit"), sort_keys=True)]
for c in d["cases"]:
    out.append("case " + c["name"] + " " + json.dumps({k: c.get(k) for k in ("iterations", "setup", "growth", "leaks")},
                                                      sort_keys=True))
# an image an exec replaced: its live figures at the exec, no exit, no leak check
out += sorted("process " + json.dumps({"primary": p["primary"], "execed": p.get("execed"), "exit": p.get("exit"),
                                       "totals": totals(p["totals"]), "live_at_exit": p.get("live_at_exit"),
                                       "leaks_at_exit": p.get("leaks_at_exit")}, sort_keys=True)
              for p in d["processes"])
open(sys.argv[2], "w").write("\n".join(out) + "\n")
print((d.get("sampling") or {}).get("mean_interval_bytes", "MISSING"))
EOF
}

# figures JSON PREFIX: "allocations frees bytes live_blocks live_bytes
# lost_blocks lost_bytes indirect_blocks possible_blocks reachable_blocks
# reachable_bytes" of the process image at PREFIX (a python path).
figures() {
    jget "$1" "' '.join(str(x) for x in [${2}['totals']['allocations'], ${2}['totals']['frees'], ${2}['totals']['allocated_bytes'], ${2}['live_at_exit']['blocks'], ${2}['live_at_exit']['bytes'], ${2}['leaks_at_exit']['definitely_lost']['blocks'], ${2}['leaks_at_exit']['definitely_lost']['bytes'], ${2}['leaks_at_exit']['indirectly_lost']['blocks'], ${2}['leaks_at_exit']['possibly_lost']['blocks'], ${2}['leaks_at_exit']['still_reachable']['blocks'], ${2}['leaks_at_exit']['still_reachable']['bytes']])"
}
# figures_each JSON COND: the same figures of every image for which the
# python condition COND on p holds, in pid order, " / " between them.
figures_each() {
    jget "$1" "' / '.join(' '.join(str(x) for x in [p['totals']['allocations'], p['totals']['frees'], p['totals']['allocated_bytes'], p['live_at_exit']['blocks'], p['live_at_exit']['bytes'], p['leaks_at_exit']['definitely_lost']['blocks'], p['leaks_at_exit']['definitely_lost']['bytes'], p['leaks_at_exit']['indirectly_lost']['blocks'], p['leaks_at_exit']['possibly_lost']['blocks'], p['leaks_at_exit']['still_reachable']['blocks'], p['leaks_at_exit']['still_reachable']['bytes']]) for p in sorted(d['processes'], key=lambda p: p['pid']) if $2)"
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

# record_mode MODE RATES RUNS [REPORT-OPTION...]: the run without sampling
# ($WORK/MODE-all.json), then RUNS runs at each of RATES, each compared
# with it; every report made with the REPORT-OPTIONs.
record_mode() {
    _mode=$1 _rates=$2 _runs=$3
    shift 3
    record "$WORK/$_mode-all.trace" -- "$FIXTURES/held_threads" "$_mode"
    [ -f "$WORK/$_mode-all.trace" ] || fail "memslope record wrote no trace for $_mode (exit $REC_RC)"
    expect_eq "$_mode: record exit status" 0 "$REC_RC"
    report_json "$WORK/$_mode-all.trace" "$WORK/$_mode-all.json" "$@"
    expect_eq "$_mode: no sampling object without --sample-rate" MISSING \
        "$(parts "$WORK/$_mode-all.json" "$WORK/$_mode-all.exact")"
    for rate in $_rates; do
        run=1
        while [ "$run" -le "$_runs" ]; do
            name=$_mode-$rate-$run
            record "$WORK/$name.trace" --sample-rate "$rate" -- "$FIXTURES/held_threads" "$_mode"
            [ -f "$WORK/$name.trace" ] || fail "memslope record wrote no trace for $name (exit $REC_RC)"
            expect_eq "$name: record exit status" 0 "$REC_RC"
            report_json "$WORK/$name.trace" "$WORK/$name.json" "$@"
            expect_eq "$name: sampled every $rate" "$(rate_bytes "$rate")" \
                "$(parts "$WORK/$name.json" "$WORK/$name.exact")"
            if cmp -s "$WORK/$_mode-all.exact" "$WORK/$name.exact"; then
                log "ok       $name: totals, leaks, cases and processes equal the run without sampling"
            else
                log "  without sampling (<) against --sample-rate $rate (>):"
                diff "$WORK/$_mode-all.exact" "$WORK/$name.exact" | sed 's/^/    /'
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
record_mode threads "1G 512K" "$REPEATS"
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
record_mode case "1G 512K" "$REPEATS"
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
record_mode fork "1G 512K" "$REPEATS"
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

# The modes from the review of the held sets (a set left by a thread's
# unusual end, or to be read from an image that is gone), at 1G only: what
# they test is where a whole set goes, which the rate does not change. The
# races (raw_exit, fork_end) get three runs, the others two.
FIGS="allocations frees bytes live(blocks bytes) lost(blocks bytes) indirect possibly reachable(blocks bytes)"

# raw_exit: the fixture's own 8,972 allocations (8,960 blocks the freer
# frees, 7 lost, 5 kept), 8,960 frees and 4,660,672 bytes (8,960 x 520 B +
# 672 + 800 B), and 2 TLS vectors (the freer's and the leaver's, which is
# joined as any thread: the kernel clears its tid at its exit, and its
# stack goes to glibc's cache, which freeres empties); at exit the
# leaver's 7 x 96 B lost and 5 x 160 B reachable, 12 blocks (1,472 B) live.
record_mode raw_exit 1G 3
J=$WORK/raw_exit-all.json
expect_eq "raw_exit: $FIGS" "$((8972 + 2)) $((8960 + 2)) $((4660672 + 2 * dtv)) 12 1472 7 672 0 0 5 800" \
    "$(figures "$J" "$PRIMARY")"

# main_exit, reported without the default suppressions: W1 calls exit(),
# so its TLS vector is live at the exit, and the default file suppresses
# it by its stack (allocate_dtv), which an unsampled block does not have:
# suppressed without sampling, possibly lost with it, by design
# (docs/user-guide.md: in a sampled trace the suppressed figures are
# estimates). Without the file it is possibly lost in both, as memcheck
# says. The fixture's own 25,825 allocations (2 x 12,800 churned, 2 x 110
# dropped or kept by the workers, 5 by main), 25,600 frees and 13,325,200
# bytes (25,600 x 520 B + 2 x (4,800 + 1,280) + 240 + 800 B); 2 TLS vectors,
# W0's freed by freeres (W1 joins W0), W1's live; and what glibc allocates
# when pthread_exit has it load libgcc_s for the unwinding (dlopen, all
# freed by freeres at the exit), read from the report as the vectors are.
# At exit: 203 blocks lost (2 x 100 x 48 + 3 x 80 = 9,840 B), 22 reachable
# (2 x 10 x 128 + 2 x 400 = 3,360 B), W1's vector possibly lost: 226 blocks,
# 13,200 B + a vector live.
record_mode main_exit 1G 2 --no-default-suppressions
J=$WORK/main_exit-all.json
dl=$(jget "$J" "' '.join(str(sum(s[k] for s in d['cases'][0]['sites'] if any(f.get('function') in ('_dl_open', '__libc_dlopen_mode') for f in s['frames']))) for k in ('allocations', 'allocated_bytes', 'live_bytes'))")
dl_blocks=${dl%% *} dl_live=${dl##* } dl_bytes=${dl#* }
dl_bytes=${dl_bytes% *}
case "$dl_blocks$dl_bytes" in
    ''|*[!0-9]*) fail "cannot read what glibc's dlopen of libgcc_s allocated: '$dl'" ;;
esac
log "  pthread_exit's dlopen of libgcc_s: $dl_blocks blocks, $dl_bytes bytes, $dl_live bytes live at exit"
expect_ne "main_exit: blocks allocated by glibc's dlopen of libgcc_s (pthread_exit's unwinder)" 0 "$dl_blocks"
expect_eq "main_exit: $FIGS" \
    "$((25825 + 2 + dl_blocks)) $((25600 + 1 + dl_blocks)) $((13325200 + 2 * dtv + dl_bytes)) 226 $((13200 + dtv)) 203 9840 0 1 22 3360" \
    "$(figures "$J" "$PRIMARY")"

# fork_end, two rounds. The parent: 2 x 12,032 blocks allocated and freed
# (2 x 6,256,640 B), 1 TLS vector (the second worker reuses the first's
# stack from glibc's cache, vector and all), freed by freeres; nothing live
# at exit. Each child: inherits the ending worker's 12,032 blocks and its
# vector, frees 64 (and the vector, freeres at its _exit), drops 64 (64 x
# 520 = 33,280 B lost), keeps 11,904 (6,190,080 B reachable): 11,968 blocks
# (6,223,360 B) live.
record_mode fork_end 1G 3
J=$WORK/fork_end-all.json
expect_eq "fork_end parent: $FIGS" "$((2 * 12032 + 1)) $((2 * 12032 + 1)) $((2 * 6256640 + dtv)) 0 0 0 0 0 0 0 0" \
    "$(figures "$J" "$PRIMARY")"
expect_eq "fork_end children: $FIGS" \
    "0 65 0 11968 6223360 64 33280 0 0 11904 6190080 / 0 65 0 11968 6223360 64 33280 0 0 11904 6190080" \
    "$(figures_each "$J" "not p['primary']")"
expect_eq "fork_end: exits" '[{"status": 0}, {"status": 0}, {"status": 0}]' "$(jget "$J" '[p["exit"] for p in d["processes"]]')"

# exec: the first image is in processes, "execed", with no exit and no leak
# check, its live figures those at the exec; the image the exec made is the
# primary one (it allocates nothing). The first image: 200 blocks (W 100 x
# 48 B, main 100 x 80 B) and W's TLS vector allocated; main freed 20 of W's
# (960 B); live at the exec 180 blocks (80 x 48 + 100 x 80 = 11,840 B) and
# the vector of W, which the exec ended.
record_mode exec 1G 2
J=$WORK/exec-all.json
FIRST='[p for p in d["processes"] if p["execed"]][0]'
expect_eq "exec: images (primary, execed, exit, exe)" \
    '[[false, true, null, true], [true, false, {"status": 0}, true]]' \
    "$(jget "$J" '[[p["primary"], p["execed"], p["exit"], p["exe"].endswith("/held_threads")] for p in sorted(d["processes"], key=lambda p: p["primary"])]')"
expect_eq "exec: first image: allocations frees bytes live(blocks bytes) leaks" \
    "201 20 $((12800 + dtv)) 181 $((11840 + dtv)) None" \
    "$(jget "$J" "' '.join(str(x) for x in [${FIRST}['totals']['allocations'], ${FIRST}['totals']['frees'], ${FIRST}['totals']['allocated_bytes'], ${FIRST}['live_at_exit']['blocks'], ${FIRST}['live_at_exit']['bytes'], ${FIRST}['leaks_at_exit']])")"
expect_eq "exec: the image it made: $FIGS" "0 0 0 0 0 0 0 0 0 0 0" "$(figures "$J" "$PRIMARY")"

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
    for mode in raw_exit main_exit; do
        vg_run "$mode" -- "$FIXTURES/held_threads" "$mode"
        vg_totals "$(vg_log "$mode")"
        # main_exit: W1's vector possibly lost in both (its report has no default suppressions)
        expect_vg_leaks "$WORK/$mode-all.json" "$PRIMARY" "$mode"
        expect_vg_sums "$WORK/$mode-all.json" "$PRIMARY" 2 "$mode"
    done
    # vg_fork MODE VECTORS: one log per process; a child's names its
    # parent's pid as its parent. fork_end's two children have the same
    # figures (checked above): each is compared with the first.
    vg_fork() {
        vg_run "$1" -- "$FIXTURES/held_threads" "$1"
        for l in "$WORK/vg.$1".*.log; do
            pid=${l%.log}
            pid=${pid##*.}
            vg_totals "$l"
            if grep -q "Parent PID: $pid\$" "$WORK/vg.$1".*.log; then
                expect_vg_sums "$WORK/$1-all.json" "$PRIMARY" "$2" "$1 parent"
                expect_vg_leaks "$WORK/$1-all.json" "$PRIMARY" "$1 parent"
            else
                # memcheck's totals in a child go on from its parent's: not compared.
                expect_vg_leaks "$WORK/$1-all.json" "$CHILD" "$1 child"
            fi
        done
    }
    vg_fork fork 2
    vg_fork fork_end 1
else
    log "valgrind not installed: the cross-check with memcheck is skipped"
fi
finish
