#!/bin/sh
# Suppressions (report --suppressions, gate --suppressions, the default file):
# on leak_cycle (definitely lost 32 B in 1 block, indirectly lost 96 B in 3,
# still reachable 96 B in 3 from main), Valgrind's and LeakSanitizer's
# formats take exactly the loss records they name out of the categories into
# "suppressed"; --format suppressions round-trips on demo_leak (100 x 48 B);
# gate stops counting suppressed leaks; the default file hides leak_threads'
# four thread vectors (possibly lost when glibc's freeres does not free
# them at exit: record --no-freeres) and nothing of its own 576-byte leak,
# as memcheck does with the same file.
. "$(dirname "$0")/lib.sh"
need_memslope
need_fixture leak_cycle demo_leak growth_cases leak_threads fork_leak_child
need_python

DEFAULT_SUPP=$(dirname "$MEMSLOPE")/../share/memslope/default.supp
[ -f "$DEFAULT_SUPP" ] || fail "the default suppressions are not built: $DEFAULT_SUPP (run: make all)"

# report_with NAME TRACE [OPTION...]: text and JSON reports with the options,
# into $WORK/NAME.txt and $WORK/NAME.json; both must exit 0.
report_with() {
    _name=$1 _trace=$2
    shift 2
    log "\$ memslope report $_trace $*"
    "$MEMSLOPE" report "$_trace" "$@" >"$WORK/$_name.txt" 2>"$WORK/$_name.err"
    _rc=$?
    [ -s "$WORK/$_name.err" ] && sed 's/^/    | /' "$WORK/$_name.err" | head -n 10
    [ "$_rc" -eq 0 ] || fail "memslope report $* exited $_rc"
    "$MEMSLOPE" report "$_trace" --format json "$@" >"$WORK/$_name.json" 2>/dev/null ||
        fail "memslope report --format json $* failed"
}

# amounts JSON: "definite indirect possible reachable suppressed" as bytes/blocks.
amounts() {
    jget "$1" '" ".join("%d/%d" % (d["leaks_at_exit"][k]["bytes"], d["leaks_at_exit"][k]["blocks"]) for k in ("definitely_lost", "indirectly_lost", "possibly_lost", "still_reachable", "suppressed"))'
}

supp() { # NAME TEXT: writes $WORK/NAME.supp
    printf '%s\n' "$2" >"$WORK/$1.supp"
}

record "$WORK/cycle.trace" -- "$FIXTURES/leak_cycle" </dev/null
expect_eq "leak_cycle: record exit" 0 "$REC_RC"
report_with plain "$WORK/cycle.trace" --no-default-suppressions
expect_eq "without suppressions" "32/1 96/3 0/0 96/3 0/0" "$(amounts "$WORK/plain.json")"
expect_match "text: suppressed line" '^        suppressed: 0 bytes in 0 blocks$' "$WORK/plain.txt"

# --- Valgrind's format ---------------------------------------------------------------

supp indirect '{
   the rest of the dropped cycle
   Memcheck:Leak
   match-leak-kinds: indirect
   fun:calloc
   fun:make_cycle
   fun:drop_cycle
}'
report_with vg_indirect "$WORK/cycle.trace" --suppressions "$WORK/indirect.supp"
expect_eq "Valgrind, match-leak-kinds: indirect" "32/1 0/0 0/0 96/3 96/3" "$(amounts "$WORK/vg_indirect.json")"
expect_eq "per case leaks = leaks_at_exit" true "$(jget "$WORK/vg_indirect.json" 'd["cases"][0]["leaks"] == d["leaks_at_exit"]')"
expect_match "text: suppressed line" '^        suppressed: 96 bytes in 3 blocks$' "$WORK/vg_indirect.txt"
expect_match "text: one loss record left" '^32 bytes in 1 blocks are definitely lost in loss record 1 of 1$' "$WORK/vg_indirect.txt"
expect_eq "suppressed records count in no site's leaked bytes" 32 \
    "$(jget "$WORK/vg_indirect.json" 'sum(s["leaked_bytes"] for s in d["cases"][0]["sites"])')"

supp frames '{
   any frames down to drop_cycle, with a comment inside
   Memcheck:Leak
   fun:*
   # the allocation and make_cycle
   ...
   fun:drop_cycle
}'
report_with vg_frames "$WORK/cycle.trace" --suppressions "$WORK/frames.supp"
expect_eq "Valgrind, ... down to drop_cycle" "0/0 0/0 0/0 96/3 128/4" "$(amounts "$WORK/vg_frames.json")"
expect_match "text: no loss record left" '^No leaks: every block still allocated at exit was reachable' "$WORK/vg_frames.txt"

supp prefix '{
   drop_cycle right below the allocator: it is make_cycle there
   Memcheck:Leak
   fun:malloc
   fun:drop_cycle
}'
report_with vg_prefix "$WORK/cycle.trace" --suppressions "$WORK/prefix.supp"
expect_eq "Valgrind, frames from the top, no gap" "32/1 96/3 0/0 96/3 0/0" "$(amounts "$WORK/vg_prefix.json")"

supp objects '{
   two frames in the fixture, then main
   Memcheck:Leak
   fun:*alloc
   obj:*/leak_cycl?
   obj:*/leak_cycle
   fun:main
}
{
   the kept cycle, still reachable
   Memcheck:Leak
   match-leak-kinds: reachable
   fun:malloc
   fun:make_cycl?
   fun:main
}'
report_with vg_objects "$WORK/cycle.trace" --suppressions "$WORK/objects.supp"
expect_eq "Valgrind, obj: and ? (and reachable)" "0/0 0/0 0/0 0/0 224/7" "$(amounts "$WORK/vg_objects.json")"

# --- LeakSanitizer's format -------------------------------------------------------------

supp lsan_function '# a function in any frame
leak:drop_cycle'
report_with lsan_function "$WORK/cycle.trace" --suppressions "$WORK/lsan_function.supp"
expect_eq "LSan, a function" "0/0 0/0 0/0 96/3 128/4" "$(amounts "$WORK/lsan_function.json")"
supp lsan_file 'leak:leak_cycle.c'
report_with lsan_file "$WORK/cycle.trace" --suppressions "$WORK/lsan_file.supp"
expect_eq "LSan, a source file (every record)" "0/0 0/0 0/0 0/0 224/7" "$(amounts "$WORK/lsan_file.json")"
supp lsan_anchored 'leak:^cycle'
report_with lsan_anchored "$WORK/cycle.trace" --suppressions "$WORK/lsan_anchored.supp" \
    --suppressions "$WORK/indirect.supp"
expect_eq "LSan, anchored: nothing; with a second file: its entry" "32/1 0/0 0/0 96/3 96/3" \
    "$(amounts "$WORK/lsan_anchored.json")"

# --- bad files ---------------------------------------------------------------------------

"$MEMSLOPE" report "$WORK/cycle.trace" --suppressions "$WORK/none.supp" >"$WORK/out" 2>&1
expect_eq "missing file: exit 1" 1 $?
expect_match "missing file: named" "none.supp: cannot read the suppressions: No such file or directory" "$WORK/out"
supp broken '{
   no kind line
}'
"$MEMSLOPE" report "$WORK/cycle.trace" --suppressions "$WORK/broken.supp" >"$WORK/out" 2>&1
expect_eq "broken file: exit 1" 1 $?
expect_match "broken file: file and line" 'broken.supp:3: the suppression that begins at line 1 needs a name and a TOOL:KIND line' "$WORK/out"
"$MEMSLOPE" gate "$WORK/cycle.trace" --max-leaked 0 --suppressions "$WORK/broken.supp" >"$WORK/out" 2>&1
expect_eq "gate, broken file: exit 2" 2 $?

# --- --format suppressions, read back -----------------------------------------------------

LEAK=$(fixture_line demo_leak.c DEMO-LEAK)
record "$WORK/demo.trace" -- "$FIXTURES/demo_leak"
"$MEMSLOPE" report "$WORK/demo.trace" --format suppressions -o "$WORK/demo.supp" 2>"$WORK/out"
expect_eq "--format suppressions: exit" 0 $?
expect_eq "one entry" 1 "$(grep -c '^{$' "$WORK/demo.supp")"
expect_match "named after the site" "^   memslope:leaky_site \\(demo_leak.c:$LEAK\\)$" "$WORK/demo.supp"
expect_match "its kind" '^   match-leak-kinds: definite$' "$WORK/demo.supp"
expect_match "the allocator, then the frames" '^   fun:\*$' "$WORK/demo.supp"
expect_eq "frames by name, innermost first" "leaky_site handle_request main" \
    "$(grep '^   fun:' "$WORK/demo.supp" | sed -n '2,4s/^   fun://p' | tr '\n' ' ' | sed 's/ $//')"
report_with demo_plain "$WORK/demo.trace"
report_with demo_back "$WORK/demo.trace" --suppressions "$WORK/demo.supp"
expect_eq "before: the leak" "4800/100 0/0 0/0 1152/17 0/0" "$(amounts "$WORK/demo_plain.json")"
expect_eq "read back: the leak is suppressed" "0/0 0/0 0/0 1152/17 4800/100" "$(amounts "$WORK/demo_back.json")"
"$MEMSLOPE" report "$WORK/demo.trace" --suppressions "$WORK/demo.supp" --format suppressions -o "$WORK/none.supp"
expect_match "nothing left to suppress" '^# no loss record to suppress' "$WORK/none.supp"
if command -v valgrind >/dev/null 2>&1; then
    # The same file in memcheck: C frames are named as memcheck names them.
    vg_run demo --suppressions="$WORK/demo.supp" -- "$FIXTURES/demo_leak"
    expect_match "memcheck reads it and suppresses the 100 blocks" 'suppressed: 4,800 bytes in 100 blocks' "$(vg_log demo)"
fi

# --- gate ------------------------------------------------------------------------------------

record "$WORK/g.trace" -- "$FIXTURES/growth_cases"
"$MEMSLOPE" gate "$WORK/g.trace" --max-leaked 0 >"$WORK/out" 2>&1
expect_eq "gate: leaky and cycle leak" 2 "$(grep -c '^memslope gate: FAIL case' "$WORK/out")"
supp leak48 'leak:leak_48'
"$MEMSLOPE" gate "$WORK/g.trace" --max-leaked 0 --suppressions "$WORK/leak48.supp" >"$WORK/out" 2>&1
expect_eq "gate: with leak_48 suppressed, exit 1 still (cycle)" 1 $?
expect_eq "gate: only the cycle fails" "cycle" "$(sed -n "s/^memslope gate: FAIL case '\\([a-z]*\\)'.*/\\1/p" "$WORK/out" | tr '\n' ' ' | sed 's/ $//')"
"$MEMSLOPE" gate "$WORK/g.trace" --max-leaked-blocks 0 --case leaky --suppressions="$WORK/leak48.supp" >"$WORK/out" 2>&1
expect_eq "gate: suppressed blocks count toward no limit" 0 $?

# --- the default suppressions ------------------------------------------------------------------

THREAD_LEAK=$(fixture_line leak_threads.c THREAD-LEAK)
record "$WORK/threads.trace" --no-freeres -- "$FIXTURES/leak_threads" </dev/null
report_with defaults "$WORK/threads.trace"
report_with no_defaults "$WORK/threads.trace" --no-default-suppressions
expect_eq "defaults off: four thread vectors possibly lost" 4 "$(jget "$WORK/no_defaults.json" 'd["leaks_at_exit"]["possibly_lost"]["blocks"]')"
expect_eq "defaults on: none" "0/0" "$(jget "$WORK/defaults.json" '"%d/%d" % (d["leaks_at_exit"]["possibly_lost"]["bytes"], d["leaks_at_exit"]["possibly_lost"]["blocks"])')"
expect_eq "defaults on: suppressed = what was possibly lost" \
    "$(jget "$WORK/no_defaults.json" '"%d/%d" % (d["leaks_at_exit"]["possibly_lost"]["bytes"], d["leaks_at_exit"]["possibly_lost"]["blocks"])')" \
    "$(jget "$WORK/defaults.json" '"%d/%d" % (d["leaks_at_exit"]["suppressed"]["bytes"], d["leaks_at_exit"]["suppressed"]["blocks"])')"
for j in defaults no_defaults; do
    expect_eq "$j: the fixture's own leak" '{"blocks": 8, "bytes": 576}' "$(jget "$WORK/$j.json" 'd["leaks_at_exit"]["definitely_lost"]')"
done
expect_match "defaults on: the fixture's leak still a loss record" "^    at leak_two \\(fixtures/leak_threads.c:$THREAD_LEAK\\)" "$WORK/defaults.txt"
expect_eq "defaults on: the entry used, and what it took" "True 4 glibc: a thread's dynamic thread vector" \
    "$(jget "$WORK/defaults.json" '" ".join(["%s %d %s" % (u["default"], u["blocks"], u["name"].split(",")[0]) for u in d["suppressions_used"]])')"
expect_match "defaults on: the text names it" "^   used suppression: [0-9,]+ bytes in 4 blocks: glibc: a thread's dynamic thread vector.* \\(default.supp:[0-9]+\\)$" "$WORK/defaults.txt"
expect_eq "defaults off: no entry used" "[]" "$(jget "$WORK/no_defaults.json" 'd["suppressions_used"]')"
expect_no_match "defaults on: no possibly lost loss record" 'possibly lost in loss record' "$WORK/defaults.txt"
"$MEMSLOPE" report "$WORK/threads.trace" --format html -o "$WORK/threads.html" 2>/dev/null
expect_eq "html: the page's data has the suppressed figures" \
    "$(jget "$WORK/defaults.json" '[d["leaks_at_exit"]["suppressed"]["bytes"], d["leaks_at_exit"]["suppressed"]["blocks"]]')" "$("$PY" - "$WORK/threads.html" <<'EOF'
import json, re, sys
page = open(sys.argv[1]).read()
d = json.loads(re.search(r'<script type="application/json" id="memslope-data">(.*?)</script>', page, re.S).group(1))
print(d["leaks_at_exit"]["suppressed"])
EOF
)"
# A child process's leak: gate checks every process, so --format
# suppressions writes its loss records too (it wrote the primary's only,
# and the file it gave could not make the gate pass).
record "$WORK/child.trace" -- "$FIXTURES/fork_leak_child"
"$MEMSLOPE" report "$WORK/child.trace" --format suppressions -o "$WORK/child.supp"
# (its three blocks' records, of one site called from three lines, make
# one entry: the frames are named by function; its comment counts all
# three, 1000 + 300 + 91 bytes)
expect_eq "a child's leak: one entry" 1 "$(grep -c '^{' "$WORK/child.supp")"
expect_match "... named with the child's process" '^# loss record 1 of 1: 1391 bytes in 3 blocks, definitely lost, at child_loses .*\(process [0-9]+, ' "$WORK/child.supp"
# The same program run twice: one entry for both children's records, its
# comment counting the six blocks of both.
record "$WORK/twice.trace" -- sh -c '"$1"; "$1"' sh "$FIXTURES/fork_leak_child"
"$MEMSLOPE" report "$WORK/twice.trace" --format suppressions -o "$WORK/twice.supp"
expect_eq "the program twice: one entry" 1 "$(grep -c '^{' "$WORK/twice.supp")"
expect_match "... counting both" '^# loss record 1 of 1: 2782 bytes in 6 blocks, definitely lost, at child_loses .*\(in 2 processes\)$' "$WORK/twice.supp"
"$MEMSLOPE" gate "$WORK/child.trace" --max-leaked 0 >/dev/null 2>&1
expect_eq "... gate without them: fails" 1 "$?"
"$MEMSLOPE" gate "$WORK/child.trace" --max-leaked 0 --suppressions "$WORK/child.supp" >"$WORK/child.gate" 2>&1
expect_eq "... gate with them: passes" 0 "$?"
if command -v valgrind >/dev/null 2>&1; then
    vg_run threads --run-libc-freeres=no --run-cxx-freeres=no --suppressions="$DEFAULT_SUPP" -- "$FIXTURES/leak_threads"
    vg_totals "$(vg_log threads)"
    expect_eq "memcheck with the default file: possibly lost blocks" 0 "$VG_POS_BLOCKS"
    expect_match "memcheck with the default file: the same 4 blocks suppressed" 'suppressed: [0-9,]+ bytes in 4 blocks' "$(vg_log threads)"
fi
finish
