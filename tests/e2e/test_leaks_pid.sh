#!/bin/sh
# memslope leaks PID on running fixtures (never preloaded): the four
# categories' block counts equal memcheck's at the fixture's exit, bytes are
# at least the requested ones (memslope sees glibc's usable sizes), the
# JSON is valid, the exit status says whether blocks are definitely or
# indirectly lost (1) or not (0), as macOS leaks, the text is a summary that
# fits a screen (every block with --verbose), and each process goes on as if
# nothing happened (not left stopped, exits 0 when released).
. "$(dirname "$0")/lib.sh"
need_memslope
need_python
FIXTURES_USED="leak_wait leak_cycle leak_interior leak_xor leak_roots leak_threads"
# shellcheck disable=SC2086
need_fixture $FIXTURES_USED

# Expected "definite indirect possible reachable" block counts, known from
# the fixtures' sources (pthread's DTVs are the possibly lost blocks of
# the threaded ones, as memcheck reports them too), and requested bytes of
# the lost ones.
expected_blocks() {
    case $1 in
        leak_wait) echo "8 4 3 6" ;;
        leak_cycle) echo "1 3 0 3" ;;
        leak_interior) echo "1 1 2 1" ;;
        leak_xor) echo "1 0 0 1" ;;
        leak_roots) echo "0 0 3 6" ;;
        leak_threads) echo "8 0 4 4" ;;
    esac
}
expected_min_bytes() {
    case $1 in
        leak_wait) echo "288 128" ;;
        leak_cycle) echo "32 96" ;;
        leak_interior) echo "48 40" ;;
        leak_xor) echo "40 0" ;;
        leak_roots) echo "0 0" ;;
        leak_threads) echo "576 0" ;;
    esac
}

# start_waiting NAME: runs the fixture with its stdin on a fifo; sets PID.
start_waiting() {
    rm -f "$WORK/$1.in" "$WORK/$1.pid"
    mkfifo "$WORK/$1.in"
    "$FIXTURES/$1" <"$WORK/$1.in" >"$WORK/$1.pid" 2>"$WORK/$1.err" &
    CHILD=$!
    exec 3>"$WORK/$1.in"
    PID=$(await_pid "$WORK/$1.pid")
    [ "$PID" = "$CHILD" ] || fail "$1 did not print its pid (got '$PID', expected $CHILD)"
}

category() { jget "$1" "d[\"leaks\"][\"$2\"][\"$3\"]"; }

for f in $FIXTURES_USED; do
    log "== $f"
    start_waiting "$f"
    log "\$ memslope leaks --format json $PID"
    timeout -k 5 60 "$MEMSLOPE" leaks --format json "$PID" >"$WORK/$f.json" 2>"$WORK/$f.leaks.err"
    rc=$?
    # shellcheck disable=SC2046
    set -- $(expected_blocks "$f")
    lost_blocks=$(($1 + $2 + $3))
    expect_eq "$f: memslope leaks exit status (1: blocks definitely or indirectly lost)" \
        "$([ $(($1 + $2)) -gt 0 ] && echo 1 || echo 0)" "$rc"
    [ -s "$WORK/$f.leaks.err" ] && sed 's/^/    | /' "$WORK/$f.leaks.err"
    python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$WORK/$f.json" ||
        fail "$f: memslope leaks printed invalid JSON"
    state=$(awk '/^State:/{print $2}' "/proc/$PID/status")
    expect_in "$f: process state after the scan" "S R" "$state"
    expect_eq "$f: definitely lost blocks" "$1" "$(category "$WORK/$f.json" definitely_lost blocks)"
    expect_eq "$f: indirectly lost blocks" "$2" "$(category "$WORK/$f.json" indirectly_lost blocks)"
    expect_eq "$f: possibly lost blocks" "$3" "$(category "$WORK/$f.json" possibly_lost blocks)"
    expect_eq "$f: still reachable blocks" "$4" "$(category "$WORK/$f.json" still_reachable blocks)"
    # shellcheck disable=SC2046
    set -- $(expected_min_bytes "$f")
    def_bytes=$(category "$WORK/$f.json" definitely_lost bytes)
    ind_bytes=$(category "$WORK/$f.json" indirectly_lost bytes)
    [ "$def_bytes" -ge "$1" ] && [ "$ind_bytes" -ge "$2" ] && log "ok       $f: lost bytes $def_bytes >= $1, $ind_bytes >= $2" ||
        _mismatch "$f: lost bytes $def_bytes/$ind_bytes below the requested $1/$2"
    leaked=$(jget "$WORK/$f.json" 'len(d["blocks"])')
    expect_eq "$f: leaked blocks listed" "$(( $(category "$WORK/$f.json" definitely_lost blocks) + $(category "$WORK/$f.json" indirectly_lost blocks) + $(category "$WORK/$f.json" possibly_lost blocks) ))" "$leaked"
    if [ "$f" = leak_wait ]; then
        log "\$ memslope leaks $PID"
        timeout -k 5 60 "$MEMSLOPE" leaks "$PID" >"$WORK/$f.txt" 2>&1
        expect_eq "$f: text format exit status" 1 "$?"
        expect_match "$f: text summary" "definitely lost +[0-9]+ bytes in 8 blocks" "$WORK/$f.txt"
        expect_match "$f: the largest groups" "^ +2 +296 +592  possibly lost " "$WORK/$f.txt"
        expect_match "$f: a group of the three threads' 40-byte blocks and the cycle's head" \
            "^ +4 +40 +160  definitely lost " "$WORK/$f.txt"
        expect_lt "$f: the summary fits a screen (lines)" 31 "$(wc -l <"$WORK/$f.txt" | tr -d ' ')"
        expect_no_match "$f: no block addresses without --verbose" "^  0x[0-9a-f]{16} " "$WORK/$f.txt"
        expect_eq "$f: JSON groups add up to the lost blocks" "$lost_blocks" \
            "$(jget "$WORK/$f.json" 'sum(g["blocks"] for g in d["groups"])')"
        timeout -k 5 60 "$MEMSLOPE" leaks --verbose "$PID" >"$WORK/$f.verbose.txt" 2>&1
        expect_eq "$f: --verbose exit status" 1 "$?"
        expect_eq "$f: --verbose lists every lost block" "$lost_blocks" \
            "$(grep -cE '^  0x[0-9a-f]{16} ' "$WORK/$f.verbose.txt")"
        expect_match "$f: text preview of the XOR-hidden block" "definitely lost +68 69 64 64 65 6e .*\\|hidden by xor" "$WORK/$f.verbose.txt"
        expect_match "$f: JSON preview" '"ascii": "hidden by xor' "$WORK/$f.json"
    fi
    echo >&3
    exec 3>&-
    wait "$CHILD"
    expect_eq "$f: exit status after being scanned and released" 0 "$?"

    if command -v valgrind >/dev/null 2>&1; then
        # The process was scanned while it ran: memcheck without freeres
        # at exit sees its heap as it was.
        vg_run "$f" --run-libc-freeres=no --run-cxx-freeres=no -- "$FIXTURES/$f" </dev/null
        vg_totals "$(vg_log "$f")"
        expect_eq "$f: definitely lost blocks = memcheck's" "$VG_DEF_BLOCKS" "$(category "$WORK/$f.json" definitely_lost blocks)"
        expect_eq "$f: indirectly lost blocks = memcheck's" "$VG_IND_BLOCKS" "$(category "$WORK/$f.json" indirectly_lost blocks)"
        expect_eq "$f: possibly lost blocks = memcheck's" "$VG_POS_BLOCKS" "$(category "$WORK/$f.json" possibly_lost blocks)"
        expect_eq "$f: still reachable blocks = memcheck's" "$VG_REACH_BLOCKS" "$(category "$WORK/$f.json" still_reachable blocks)"
        for kind in definitely_lost:VG_DEF_BYTES indirectly_lost:VG_IND_BYTES possibly_lost:VG_POS_BYTES still_reachable:VG_REACH_BYTES; do
            ours=$(category "$WORK/$f.json" "${kind%%:*}" bytes)
            eval theirs=\$"${kind#*:}"
            [ "$ours" -ge "$theirs" ] && log "ok       $f: ${kind%%:*} bytes $ours >= memcheck's $theirs" ||
                _mismatch "$f: ${kind%%:*} bytes $ours below memcheck's $theirs"
        done
    else
        log "valgrind not installed: compared with the expected figures only"
    fi
done
finish
