#!/bin/sh
# killed: SIGKILL, raised by the target itself or sent by kill -9 from
# outside (and SIGTERM, SIGUSR1 from outside; SIGSTOP/SIGCONT job control;
# Ctrl-C to the process group). record exits 137 (143 for SIGTERM, 138 for
# SIGUSR1, 130 for Ctrl-C),
# the trace is readable and holds every
# allocation made before the kill.
. "$(dirname "$0")/lib.sh"
need_memslope
need_fixture killed
need_python

ALLOC=$(fixture_line killed.c KILL-ALLOC)
check_killed() { # NAME [SIGNAL-NUMBER]
    J=$WORK/$1.json
    expect_eq "$1: record exit status" $((128 + ${2:-9})) "$REC_RC"
    expect_eq "$1: exit" "{\"signal\": ${2:-9}}" "$(jget "$J" 'd["exit"]')"
    expect_totals "$J" d 6 1 12577
    expect_site "$J" main "$ALLOC" allocations=5 allocated_bytes=12500 live_bytes=12500
}

# 1. raise(SIGKILL)
record_and_report raise -- "$FIXTURES/killed"
check_killed raise

# The fixture writes its pid to a file once it has allocated: wait up to
# 30 s for it, else kill the background job $bg and fail.
wait_for_pidfile() { # FILE
    _i=0
    while [ ! -s "$1" ] && [ $_i -lt 300 ]; do
        sleep 0.1
        _i=$((_i + 1))
    done
    [ -s "$1" ] || { kill -9 $bg 2>/dev/null; fail "the target never wrote $1 within 30 s"; }
}

# `killed` under memslope record in the background, to be signalled from
# outside; sets bg (memslope) and target (the fixture's pid).
record_killed_in_background() { # NAME
    PIDFILE=$WORK/$1.pid
    timeout -k 5 "$RECORD_TIMEOUT" "$MEMSLOPE" record -o "$WORK/$1.trace" -- "$FIXTURES/killed" "$PIDFILE" \
        >"$WORK/rec.out" 2>"$WORK/rec.err" &
    bg=$!
    wait_for_pidfile "$PIDFILE"
    target=$(cat "$PIDFILE")
}

# 2. kill -9 (and kill -TERM) from outside, once the fixture has allocated.
kill_from_outside() { # NAME SIGNAL-NAME SIGNAL-NUMBER
    log "\$ memslope record -o $WORK/$1.trace -- killed $WORK/$1.pid &  (then kill -$2 the target)"
    record_killed_in_background "$1"
    expect_ne "$1: target pid is not memslope's" "$bg" "$target"
    kill -"$2" "$target"
    wait $bg
    REC_RC=$?
    log "  -> exit $REC_RC"
    sed 's/^/    | /' "$WORK/rec.err" | head -n 20
    [ -f "$WORK/$1.trace" ] || fail "no trace after kill -$2 of the target"
    report_json "$WORK/$1.trace" "$WORK/$1.json"
    check_killed "$1" "$3"
}
kill_from_outside kill9 KILL 9
kill_from_outside term TERM 15
# SIGUSR1 (default action: terminate) must reach the target, not be swallowed
# by the tracer (the fixture would wait 60 s, then exit 99).
kill_from_outside usr1 USR1 10

# Job control: SIGSTOP stops the target (state T), SIGCONT resumes it, as
# without memslope; then SIGTERM ends it.
proc_state() { sed -n 's/^State:[[:space:]]*\([A-Za-z]\).*/\1/p' "/proc/$1/status" 2>/dev/null; }
wait_state() { # PID STATES: wait up to 5 s for the process to be in one of STATES
    _i=0
    while [ $_i -lt 50 ]; do
        case "$(proc_state "$1")" in [$2]) return 0 ;; esac
        sleep 0.1
        _i=$((_i + 1))
    done
    return 1
}
log "\$ memslope record -o $WORK/stop.trace -- killed $WORK/stop.pid &  (then kill -STOP, -CONT, -TERM)"
record_killed_in_background stop
kill -STOP "$target"
# Under ptrace a group-stopped process shows "t" (tracing stop), not "T".
if wait_state "$target" Tt; then st=stopped; else st=$(proc_state "$target"); fi
expect_eq "SIGSTOP: the target is stopped" stopped "$st"
sleep 0.5
expect_in "SIGSTOP: the target stays stopped" "T t" "$(proc_state "$target")"
kill -CONT "$target"
if wait_state "$target" SR; then st=running; else st=$(proc_state "$target"); fi
expect_eq "SIGCONT: the target runs again" running "$st"
kill -TERM "$target"
wait $bg
REC_RC=$?
log "  -> exit $REC_RC"
expect_eq "stop/cont/term: record exit status" 143 "$REC_RC"

# Ctrl-C: SIGINT to the whole process group (memslope and the target), in a
# session of its own with SIGINT at its default action (a shell's background
# job would ignore it). The target dies of SIGINT, record exits 130 and the
# trace holds the target's allocations. The target's ignored and blocked
# signal sets are the same as without memslope.
sigsets() { sed -n 's/^\(SigBlk\|SigIgn\):[[:space:]]*/\1=/p' "/proc/$1/status" | tr '\n' ' '; }
launch() { # PIDFILE COMMAND...: COMMAND in a new session, SIGINT default; sets bg
    _pf=$1
    shift
    rm -f "$_pf"
    "$PY" -c 'import os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_DFL)
os.setsid()
os.execv(sys.argv[1], sys.argv[1:])' "$@" >"$WORK/rec.out" 2>"$WORK/rec.err" &
    bg=$!
    wait_for_pidfile "$_pf"
}
launch "$WORK/plain.pid" "$FIXTURES/killed" "$WORK/plain.pid"
plain_sets=$(sigsets "$(cat "$WORK/plain.pid")")
kill -9 "$(cat "$WORK/plain.pid")"
wait $bg
log "\$ memslope record -o $WORK/ctrlc.trace -- killed $WORK/ctrlc.pid  (own session; then kill -INT -PGID)"
launch "$WORK/ctrlc.pid" "$MEMSLOPE" record -o "$WORK/ctrlc.trace" -- "$FIXTURES/killed" "$WORK/ctrlc.pid"
expect_eq "signal masks of the target (blocked, ignored) as without memslope" "$plain_sets" \
    "$(sigsets "$(cat "$WORK/ctrlc.pid")")"
kill -INT "-$bg"
wait $bg
REC_RC=$?
log "  -> exit $REC_RC"
sed 's/^/    | /' "$WORK/rec.err" | head -n 10
[ -f "$WORK/ctrlc.trace" ] || fail "no trace after Ctrl-C"
report_json "$WORK/ctrlc.trace" "$WORK/ctrlc.json"
check_killed ctrlc 2
finish
