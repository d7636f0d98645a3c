#!/bin/sh
# Threads that stop the world at the same moment (issue 19): 2 to 64
# threads released together hit an --iteration breakpoint, or end a case
# (a breakpoint with a leak check), at once, again and again. The tracer
# used to interrupt and wait again for a thread whose stop it had already
# collected, and hung. Every run must end (record's own timeout fails the
# test otherwise) with every iteration and case counted, and every case's
# leak check run with all threads stopped (a thread that misses the stop
# deadline skips the check, and says so).
. "$(dirname "$0")/lib.sh"
need_memslope
need_fixture stop_storm
for threads in 2 3 4 8 16 64; do
    calls=5
    [ "$threads" -le 8 ] && calls=20
    for run in 1 2; do
        record "$WORK/b.trace" --iteration storm_body -- "$FIXTURES/stop_storm" $threads $calls body
        expect_eq "$threads threads x $calls, --iteration (run $run): exit" 0 "$REC_RC"
        report_json "$WORK/b.trace" "$WORK/b.json"
        expect_eq "$threads threads x $calls, --iteration (run $run): iterations" $((threads * calls)) \
            "$(jget "$WORK/b.json" 'd["cases"][0]["iterations"]')"
        record "$WORK/m.trace" -- "$FIXTURES/stop_storm" $threads $calls markers
        expect_eq "$threads threads x $calls, case markers (run $run): exit" 0 "$REC_RC"
        expect_no_match "$threads threads x $calls, case markers (run $run): every thread stopped" \
            'did not stop within|no .*leak check' "$WORK/rec.err"
        report_json "$WORK/m.trace" "$WORK/m.json"
        expect_eq "$threads threads x $calls, case markers (run $run): cases" $((threads * calls)) \
            "$(jget "$WORK/m.json" 'len(d["cases"])')"
    done
done
finish
