#!/bin/sh
# `memslope report` on bad files: missing, empty, a folder, a foreign file
# (/bin/ls): one line naming the file on stderr, nothing on stdout, exit 1.
# A truncated real trace (every kind of cut): it prints what is complete with
# a warning and exits 0, or, when too short for any section, exits 1 with one
# line; a trace cut only before END must print. Corrupted bytes: exit 0 or 1,
# never a crash (exit status < 128).
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
printf 'MEMSLOPE\002\000\000\000\000\000\000\000' >"$WORK/v2.trace"
expect_one_line_error "a trace of version 2" "$WORK/v2.trace"
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

# Cut lengths: the first 64 bytes one by one, then about 150 spread over the
# file, then the last 40 one by one.
lengths=$("$PY" -c '
import sys
n = int(sys.argv[1])
s = set(range(0, min(n, 64))) | set(range(max(0, n - 40), n)) | set(range(0, n, max(1, n // 150)))
print(" ".join(map(str, sorted(s))))' "$SIZE")
bad=0 printed=0 refused=0
for len in $lengths; do
    head -c "$len" "$WORK/full.trace" >"$WORK/cut.trace"
    rep "$WORK/cut.trace"
    if [ "$RC" -eq 0 ]; then
        printed=$((printed + 1))
        if ! "$PY" -c 'import json,sys; json.load(open(sys.argv[1]))' "$WORK/rep.out" 2>/dev/null; then
            bad=$((bad + 1)); log "cut at $len: exit 0 but the output is not JSON"
        elif ! grep -qiE 'warn|incomplete|truncat' "$WORK/rep.err" "$WORK/rep.out"; then
            bad=$((bad + 1)); log "cut at $len: exit 0 without a warning that the trace is incomplete"
        fi
    elif [ "$RC" -eq 1 ]; then
        refused=$((refused + 1))
        if [ "$(wc -l <"$WORK/rep.err")" -ne 1 ] || ! grep -q "cut.trace" "$WORK/rep.err"; then
            bad=$((bad + 1)); log "cut at $len: exit 1 but stderr is not one line naming the file:"
            sed 's/^/    | /' "$WORK/rep.err" | head -n 5
        fi
    else
        bad=$((bad + 1)); log "cut at $len: exit $RC (crash or wrong status); stderr:"
        sed 's/^/    | /' "$WORK/rep.err" | head -n 5
    fi
    [ $bad -lt 20 ] || break
done
log "cuts: $printed printed, $refused refused with one line"
expect_eq "truncated traces handled (exit 0 + warning + JSON, or exit 1 + one line)" 0 "$bad"

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
