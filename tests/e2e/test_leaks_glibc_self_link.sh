#!/bin/sh
# A leaked block whose last byte glibc's own stale link points at
# (fixtures/glibc_self_link.c: the next chunk, alone in its large bin once,
# keeps fd_nextsize and bk_nextsize pointing at its own header when malloc
# hands it out again): definitely lost, as memcheck says, not possibly lost,
# under memslope record and under memslope leaks PID (docs/leakscan.md,
# "glibc's link of a chunk to itself is not a pointer").
. "$(dirname "$0")/lib.sh"
need_memslope
need_python
need_fixture glibc_self_link
LINE=$(fixture_line glibc_self_link.c LEAKED)

record "$WORK/s.trace" -- "$FIXTURES/glibc_self_link"
expect_eq "record exit" 0 "$REC_RC"
expect_match "the stale link came about (glibc handed the chunk out again)" "^self-link yes$" "$WORK/rec.out"
report_json "$WORK/s.trace" "$WORK/s.json" --no-default-suppressions
expect_eq "record: categories" "definitely_lost 4129/1 indirectly_lost 0/0 possibly_lost 0/0 still_reachable 7032/3" \
    "$(jget "$WORK/s.json" '" ".join("%s %d/%d" % (k, v["bytes"], v["blocks"]) for k, v in sorted(d["leaks_at_exit"].items()) if k != "suppressed")')"
expect_eq "record: the lost block's site" "main:$LINE" \
    "$(jget "$WORK/s.json" '[p for p in d["processes"] if p["primary"]][0]["loss_records"][0]["frames"][0]["function"] + ":" + str([p for p in d["processes"] if p["primary"]][0]["loss_records"][0]["frames"][0]["line"])')"

# memslope leaks PID: glibc's usable size, 4,136 bytes.
rm -f "$WORK/in"
mkfifo "$WORK/in"
"$FIXTURES/glibc_self_link" wait <"$WORK/in" >"$WORK/wait.out" &
CHILD=$!
exec 3>"$WORK/in"
PID=$(await_pid "$WORK/wait.out")
[ "$PID" = "$CHILD" ] || fail "glibc_self_link did not print its pid"
expect_match "leaks: the stale link came about" "^self-link yes$" "$WORK/wait.out"
timeout -k 5 60 "$MEMSLOPE" leaks --format json "$PID" >"$WORK/l.json" 2>"$WORK/l.err"
expect_eq "leaks: exit status (a block definitely lost)" 1 "$?"
expect_eq "leaks: lost blocks" "definitely_lost 4136/1 possibly_lost 0/0" \
    "$(jget "$WORK/l.json" '" ".join("%s %d/%d" % (k, d["leaks"][k]["bytes"], d["leaks"][k]["blocks"]) for k in ("definitely_lost", "possibly_lost"))')"
exec 3>&-
wait "$CHILD"

if command -v valgrind >/dev/null 2>&1; then
    vg_run self -- "$FIXTURES/glibc_self_link"
    vg_totals "$(vg_log self)"
    expect_eq "memcheck: definitely lost" "4129 1" "$VG_DEF_BYTES $VG_DEF_BLOCKS"
    expect_eq "memcheck: possibly lost" "0 0" "$VG_POS_BYTES $VG_POS_BLOCKS"
fi
finish
