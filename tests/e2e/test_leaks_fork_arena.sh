#!/bin/sh
# fixtures/leak_fork_arena.c: a fork child whose parent had a thread with
# its own glibc arena loses a block whose last 8 bytes are the top chunk's
# header: definitely lost, as memcheck says, not possibly lost. The child's
# new shared memory (a memfd) lies just below the thread's arena heap; that
# arena must not be taken for main_arena, or the real main_arena, whose top
# points into the block, is scanned as a root (docs/leakscan.md).
. "$(dirname "$0")/lib.sh"
need_memslope
need_python
need_fixture leak_fork_arena
LINE=$(fixture_line leak_fork_arena.c LOST)

KINDS="'definitely_lost', 'indirectly_lost', 'possibly_lost', 'still_reachable'"
# categories JSON PROCESS: "definitely_lost BYTES/BLOCKS indirectly_lost ..."
# for one process (a python expression over the report).
categories() {
    jget "$1" "' '.join('%s %d/%d' % (k, l[k]['bytes'], l[k]['blocks']) for l in [$2['leaks_at_exit']] for k in ($KINDS))"
}

record "$WORK/a.trace" -- "$FIXTURES/leak_fork_arena"
expect_eq "record exit" 0 "$REC_RC"
expect_match "the top chunk's header lay inside the lost block" "^top-in-lost yes$" "$WORK/rec.out"
CHILD_PID=$(awk '/^child /{print $2}' "$WORK/rec.out")
[ -n "$CHILD_PID" ] || fail "leak_fork_arena printed no child pid"
report_json "$WORK/a.trace" "$WORK/a.json" --no-default-suppressions
CHILD="[p for p in d['processes'] if p['pid'] == $CHILD_PID][0]"
PARENT='[p for p in d["processes"] if p["primary"]][0]'
expect_eq "number of processes" 2 "$(jget "$WORK/a.json" 'len(d["processes"])')"
expect_eq "child: categories" \
    "definitely_lost 120008/1 indirectly_lost 0/0 possibly_lost 0/0 still_reachable 0/0" \
    "$(categories "$WORK/a.json" "$CHILD")"
expect_eq "child: the lost block's site" "lose:$LINE" \
    "$(jget "$WORK/a.json" "'%(function)s:%(line)d' % ${CHILD}['loss_records'][0]['frames'][0]")"
expect_eq "parent: categories" \
    "definitely_lost 0/0 indirectly_lost 0/0 possibly_lost 0/0 still_reachable 0/0" \
    "$(categories "$WORK/a.json" "$PARENT")"

if command -v valgrind >/dev/null 2>&1; then
    vg_run arena -- "$FIXTURES/leak_fork_arena"
    VG_CHILD=$(awk '/^child /{print $2}' "$WORK/vg.arena.out")
    [ -f "$WORK/vg.arena.$VG_CHILD.log" ] || fail "no valgrind log for the child (pid '$VG_CHILD') in $WORK"
    vg_totals "$WORK/vg.arena.$VG_CHILD.log"
    expect_eq "memcheck, child: definitely lost" "120008 1" "$VG_DEF_BYTES $VG_DEF_BLOCKS"
    VG="definitely_lost $VG_DEF_BYTES/$VG_DEF_BLOCKS indirectly_lost $VG_IND_BYTES/$VG_IND_BLOCKS"
    VG="$VG possibly_lost $VG_POS_BYTES/$VG_POS_BLOCKS still_reachable $VG_REACH_BYTES/$VG_REACH_BLOCKS"
    expect_eq "child: categories = memcheck's" "$VG" "$(categories "$WORK/a.json" "$CHILD")"
else
    log "valgrind not installed: cross-check skipped"
fi
finish
