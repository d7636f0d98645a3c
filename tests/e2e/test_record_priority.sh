#!/bin/sh
# The drain loop runs five nice levels above the target where it may
# (tracer/session.c, raise_priority); the target keeps the priority it was
# started with, and without the right to raise one nothing changes.
# The target prints its own nice value and its parent's (the tracer's).
. "$(dirname "$0")/lib.sh"
need_memslope

PROBE='echo "$(nice) $(cut -d" " -f19 /proc/$PPID/stat)"'

# run_at NICE NAME [PREFIX...]: memslope record, itself at NICE, with the probe.
run_at() {
    _nice=$1 _name=$2
    shift 2
    log "\$ nice -n $_nice $* memslope record -- sh -c '$PROBE'"
    "$@" timeout -k 5 60 nice -n "$_nice" "$MEMSLOPE" record --quiet -o "$WORK/$_name.trace" -- \
        sh -c "$PROBE" >"$WORK/$_name.out" 2>"$WORK/$_name.err"
    expect_eq "$_name: record exit status" 0 "$?"
    log "  target and tracer nice: $(cat "$WORK/$_name.out")"
}

run_at 3 started_at_3
if [ "$(id -u)" -eq 0 ]; then
    expect_eq "as root: the target keeps 3, the tracer runs at 3 - 5" "3 -2" "$(cat "$WORK/started_at_3.out")"
else
    expect_eq "unprivileged: the target and the tracer keep 3" "3 3" "$(cat "$WORK/started_at_3.out")"
fi

# Without CAP_SYS_NICE the tracer cannot raise itself: it records as before.
if [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null 2>&1; then
    shared=$(mktemp -d "${TMPDIR:-/tmp}/memslope-priority.XXXXXX") && chmod 777 "$shared" ||
        fail "cannot make a folder nobody can write"
    WORK_SAVED=$WORK WORK=$shared
    run_at 3 as_nobody env HOME="$shared" setpriv --reuid=65534 --regid=65534 --clear-groups \
        --inh-caps=-all --bounding-set=-sys_nice
    expect_eq "as nobody: the target and the tracer keep 3" "3 3" "$(cat "$shared/as_nobody.out")"
    WORK=$WORK_SAVED
    rm -rf "$shared"
else
    log "not root or no setpriv: recording without the right to raise a priority is not exercised"
fi
finish
