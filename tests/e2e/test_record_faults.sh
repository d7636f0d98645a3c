#!/bin/sh
# The fault matrix (fixtures/faults.c): abort, pthread_exit in main, a target
# that closes every descriptor >= 3 at start, one that clears its
# environment, 64 threads allocating at once, a storm of signals whose
# handler allocates. Exact per-site figures known in advance, a readable
# trace, the exit status passed through.
. "$(dirname "$0")/lib.sh"
need_memslope
need_fixture faults

line() { fixture_line faults.c "$1"; }

record_and_report abort -- "$FIXTURES/faults" abort
expect_eq "abort: record exit status" 134 "$REC_RC"
expect_eq "abort: exit" '{"signal": 6}' "$(jget "$WORK/abort.json" 'd["exit"]')"
expect_site "$WORK/abort.json" do_abort "$(line FAULT-ABORT)" allocations=3 live_bytes=903

record_and_report pexit -- "$FIXTURES/faults" pthread_exit
expect_eq "pthread_exit in main: record exit status" 0 "$REC_RC"
expect_site "$WORK/pexit.json" do_pthread_exit "$(line FAULT-MAIN)" allocations=1 live_bytes=302
expect_site "$WORK/pexit.json" late_thread "$(line FAULT-THREAD)" allocations=20 allocated_bytes=6060 live_bytes=3030

record_and_report closed -- "$FIXTURES/faults" close_fds
expect_eq "close_fds: record exit status" 0 "$REC_RC"
expect_site "$WORK/closed.json" do_close_fds "$(line FAULT-CLOSED)" allocations=5 live_bytes=912

record_and_report noenv -- "$FIXTURES/faults" clear_env
expect_eq "clear_env: record exit status" 0 "$REC_RC"
expect_site "$WORK/noenv.json" do_clear_env "$(line FAULT-NOENV)" allocations=4 live_bytes=915

record_and_report t64 -- "$FIXTURES/faults" threads64
expect_eq "threads64: record exit status" 0 "$REC_RC"
expect_site "$WORK/t64.json" churn_thread "$(line FAULT-THREADS64)" allocations=64000 allocated_bytes=19584000 live_bytes=0

# Three storms: handlers that ran while the shim's own code held its guard
# (the first rule lookups) used to go unrecorded, in about 1 run of 6.
for run in 1 2 3; do
    record_and_report "storm$run" -- "$FIXTURES/faults" signal_storm
    expect_eq "signal storm $run: record exit status" 0 "$REC_RC"
    handled=$(sed -n 's/^handled \([0-9]*\)$/\1/p' "$WORK/rec.err")
    [ -n "$handled" ] || fail "signal storm $run: the fixture did not say how many signals it handled"
    # Every handler's block (308 bytes), counted from the collapsed stacks:
    # each place the signal interrupted makes a site of its own, and the
    # JSON lists a case's first 100 sites (2,410 signals once made 112).
    report_format "storm$run.folded" "$WORK/storm$run.trace" collapsed --metric allocated
    expect_eq "signal storm $run: every handler's allocation recorded" "$handled" \
        "$(awk '{ n = split($1, f, ";"); if (f[n] == "on_usr1") bytes += $2 } END { print bytes / 308 }' "$WORK/storm$run.folded")"
    expect_site "$WORK/storm$run.json" on_usr1 "$(line FAULT-HANDLER)" live_bytes=0
    # libc's own block too: glibc's freeres at exit frees the signalling
    # thread's cached TLS vector, as memcheck's does.
    expect_eq "signal storm $run: every allocation freed" 0 \
        "$(jget "$WORK/storm$run.json" 'd["totals"]["allocations"] - d["totals"]["frees"]')"
done

# Flood while the tracer is slowed: memslope is stopped for a second while
# the target churns; its rings fill and its threads wait; nothing is lost.
need_fixture threads
CHURN=$(fixture_line threads.c TH-CHURN)
"$MEMSLOPE" record -o "$WORK/flood.trace" -- "$FIXTURES/threads" 1000 >"$WORK/flood.out" 2>"$WORK/flood.err" &
tracer=$!
sleep 0.3
kill -STOP "$tracer" 2>/dev/null
sleep 1
kill -CONT "$tracer" 2>/dev/null
wait "$tracer"
expect_eq "flood: record exit status" 0 $?
report_json "$WORK/flood.trace" "$WORK/flood.json"
expect_site "$WORK/flood.json" worker "$CHURN" allocations=2000000 allocated_bytes=203000000 live_bytes=0
finish
