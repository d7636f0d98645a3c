#!/bin/sh
# `memslope report` on bad files: missing, empty, a folder, a foreign file
# (/bin/ls): one line naming the file on stderr, nothing on stdout, exit 1.
# A real trace cut just before END, or inside END: it prints what is complete
# with a warning and exits 0. (Every other cut, of a sample trace and of a
# real recording, is tests/unit/test_trace_truncation.c's.)
# Corrupted bytes: exit 0 or 1, never a crash (exit status < 128).
. "$(dirname "$0")/lib.sh"
need_memslope
need_fixture demo_leak
need_python

rep() { # FILE [FORMAT]: memslope report FILE --format FORMAT, exit status in RC
    timeout -k 5 30 "$MEMSLOPE" report "$1" --format "${2:-json}" >"$WORK/rep.out" 2>"$WORK/rep.err" </dev/null
    RC=$?
}

expect_one_line_error() { # WHAT FILE
    rep "$2"
    log "\$ memslope report $2 --format json  -> exit $RC"
    sed 's/^/    | /' "$WORK/rep.err" | head -n 5
    expect_eq "$1: exit status" 1 "$RC"
    expect_eq "$1: lines on stderr" 1 "$(wc -l <"$WORK/rep.err")"
    expect_match "$1: the message names the file" "$2" "$WORK/rep.err"
    expect_eq "$1: nothing on stdout" 0 "$(wc -c <"$WORK/rep.out")"
}

expect_one_line_error "missing file" "$WORK/does-not-exist.trace"
: >"$WORK/empty.trace"
expect_one_line_error "empty file" "$WORK/empty.trace"
mkdir -p "$WORK/folder.trace"
expect_one_line_error "a folder" "$WORK/folder.trace"
expect_one_line_error "foreign file /bin/ls" /bin/ls
printf 'MEMSLOPE\003\000\000\000\000\000\000\000' >"$WORK/v3.trace"
expect_one_line_error "a trace of version 3 (a newer memslope's)" "$WORK/v3.trace"
printf 'MEMSL' >"$WORK/short.trace"
expect_one_line_error "5 bytes of magic" "$WORK/short.trace"

# A real trace, then every kind of cut.
record "$WORK/full.trace" -- "$FIXTURES/demo_leak"
[ -s "$WORK/full.trace" ] || fail "memslope record wrote no trace (exit $REC_RC)"
SIZE=$(wc -c <"$WORK/full.trace")
log "full trace: $SIZE bytes"
rep "$WORK/full.trace"
expect_eq "full trace: exit status" 0 "$RC"
expect_no_match "full trace: no warning" '[Ww]arn|[Ii]ncomplete|[Tt]runcat' "$WORK/rep.err"

# Cut just before END, and inside END: everything recorded is there.
for cut in 24 1; do
    head -c $((SIZE - cut)) "$WORK/full.trace" >"$WORK/cut.trace"
    rep "$WORK/cut.trace"
    expect_eq "trace without the last $cut bytes: exit status" 0 "$RC"
    expect_match "trace without the last $cut bytes: warning" '[Ww]arn|[Ii]ncomplete|[Tt]runcat' "$WORK/rep.err"
    expect_eq "trace without the last $cut bytes: totals.allocations" 217 \
        "$(jget "$WORK/rep.out" 'd["totals"]["allocations"]' 2>/dev/null)"
    rep "$WORK/cut.trace" text
    expect_eq "trace without the last $cut bytes: text report exit status" 0 "$RC"
done

# Corrupted bytes (CRC failures, wild lengths, bad ids): never a crash.
crashes=0
for off in 8 12 16 20 24 28 40 64 100 $((SIZE / 3)) $((SIZE / 2)) $((SIZE * 2 / 3)) $((SIZE - 30)) $((SIZE - 8)); do
    for pat in '\377\377\377\377' '\000\000\000\000' '\177\377\377\377'; do
        cp "$WORK/full.trace" "$WORK/bad.trace"
        printf "$pat" | dd of="$WORK/bad.trace" bs=1 seek="$off" conv=notrunc 2>/dev/null
        for fmt in json text; do
            rep "$WORK/bad.trace" $fmt
            if [ "$RC" -ne 0 ] && [ "$RC" -ne 1 ]; then
                crashes=$((crashes + 1))
                log "corrupted at $off ($pat), --format $fmt: exit $RC; stderr:"
                sed 's/^/    | /' "$WORK/rep.err" | head -n 3
            fi
        done
    done
done
expect_eq "corrupted traces: runs that exited other than 0 or 1" 0 "$crashes"
finish
