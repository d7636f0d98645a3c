#!/bin/sh
# fixtures/handoff_end.c: 20,000 blocks, each allocated by a thread that
# ends at once and freed by another thread. The tracer reads an ending
# thread's ring late, so a free often comes before its allocation, and at
# times the frees of two rounds' blocks at one address come before either
# allocation: every one must still meet its own (tracer/recorder.c, struct
# pending_free). Before, 1 to 3 blocks of 49,152 bytes stayed live at exit
# in every run, the address in the live table twice, and the exit leak
# check refused the list ("heap blocks overlap"). Recorded twice: the
# order in which the tracer reads the rings varies from run to run.
. "$(dirname "$0")/lib.sh"
need_memslope
need_python
need_fixture handoff_end
ROUNDS=20000
LINE=$(fixture_line handoff_end.c HANDOFF-BLOCK)

for run in 1 2; do
    record "$WORK/h$run.trace" -- "$FIXTURES/handoff_end" "$ROUNDS"
    expect_eq "run $run: record exit" 0 "$REC_RC"
    expect_match "run $run: the fixture ran" "^rounds $ROUNDS\$" "$WORK/rec.out"
    expect_no_match "run $run: no refused leak check" "overlap" "$WORK/rec.err"
    report_json "$WORK/h$run.trace" "$WORK/h$run.json"
    J=$WORK/h$run.json
    P='[p for p in d["processes"] if p["primary"]][0]'
    expect_site "$J" allocate_and_end "$LINE" allocations=$ROUNDS allocated_bytes=$((ROUNDS * 49152)) live_bytes=0
    # and glibc's: the freer's TLS vector and the ending threads' one, and
    # stdout's buffer, all freed by freeres at exit
    expect_eq "run $run: allocations = frees, nothing live at exit" "$((ROUNDS + 3)) $((ROUNDS + 3)) 0 0" \
        "$(jget "$J" "' '.join(str(x) for x in [${P}['totals']['allocations'], ${P}['totals']['frees'], ${P}['live_at_exit']['blocks'], ${P}['live_at_exit']['bytes']])")"
    expect_eq "run $run: leaks at exit (definitely, possibly lost, reachable blocks)" "0 0 0" \
        "$(jget "$J" "' '.join(str(${P}['leaks_at_exit'][k]['blocks']) for k in ('definitely_lost', 'possibly_lost', 'still_reachable'))")"
done
finish
