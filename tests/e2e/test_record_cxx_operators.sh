#!/bin/sh
# Every form of C++ operator new and delete (fixtures/cxx_operators.cpp) is
# recorded once, at the program's call, as memcheck counts it: with glibc's
# allocator, and with tcmalloc and jemalloc preloaded, whose operators do
# not call malloc. Also: std::bad_alloc thrown through the shim's frame
# (recording goes on), and a C++ library dlopen'ed RTLD_LOCAL by a C program
# (its libstdc++ is outside the global scope where the shim looks first).
. "$(dirname "$0")/lib.sh"
need_memslope
need_fixture cxx_operators dlopen_cxx
need_python

F=cxx_operators.cpp
TCMALLOC=/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4
JEMALLOC=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2

# The figures of the fixture's own code, known in advance (see its header).
check_fixture_sites() {
    _j=$1
    expect_site "$_j" leak_new "$(fixture_line $F LEAK-NEW)" allocations=1 live_bytes=100 leaked_bytes=100
    expect_site "$_j" leak_new_array "$(fixture_line $F LEAK-NEW-ARRAY)" allocations=1 live_bytes=200 leaked_bytes=200
    expect_site "$_j" leak_nothrow "$(fixture_line $F LEAK-NOTHROW)" allocations=1 live_bytes=300 leaked_bytes=300
    expect_site "$_j" leak_array_nothrow "$(fixture_line $F LEAK-ARRAY-NOTHROW)" allocations=1 live_bytes=400
    expect_site "$_j" leak_aligned "$(fixture_line $F LEAK-ALIGNED)" allocations=1 live_bytes=128 leaked_bytes=128
    expect_site "$_j" leak_array_aligned "$(fixture_line $F LEAK-ARRAY-ALIGNED)" allocations=1 live_bytes=256
    expect_site "$_j" leak_aligned_nothrow "$(fixture_line $F LEAK-ALIGNED-NOTHROW)" allocations=1 live_bytes=512
    expect_site "$_j" leak_array_aligned_nothrow "$(fixture_line $F LEAK-ARRAY-ALIGNED-NOTHROW)" allocations=1 \
        live_bytes=1024 leaked_bytes=1024
    expect_eq "$2: sites under pairs() (allocations allocated_bytes live_bytes)" "12 768 0" \
        "$(site_any_get "$_j" allocations pairs) $(site_any_get "$_j" allocated_bytes pairs 2>/dev/null) $(site_any_get "$_j" live_bytes pairs 2>/dev/null)"
    expect_eq "$2: sites under expressions() (allocations allocated_bytes live_bytes)" "3 160 0" \
        "$(site_any_get "$_j" allocations expressions) $(site_any_get "$_j" allocated_bytes expressions 2>/dev/null) $(site_any_get "$_j" live_bytes expressions 2>/dev/null)"
    expect_eq "$2: no site under refused() (a refused nothrow new is nothing)" "none" \
        "$(site_any_get "$_j" allocations refused 2>/dev/null)"
    expect_eq "$2: no site shows an operator or malloc innermost" "[]" \
        "$(jget "$_j" 'sorted({s["frames"][0]["function"] for s in d["cases"][0]["sites"] if s["frames"] and (s["frames"][0]["function"] in ("malloc", "aligned_alloc", "posix_memalign", "memalign") or s["frames"][0]["function"].startswith("operator new"))})')"
}

# figures_without JSON MODULE: "allocations frees bytes lost_bytes
# lost_blocks reachable_bytes reachable_blocks" of the whole report, less
# the sites with a frame in MODULE (a preloaded allocator's own start-up
# allocations: memcheck's run has no such library). Those must still be
# live at exit (else "freed" is printed: the test would need their frees).
figures_without() {
    "$PY" - "$1" "$2" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
module = sys.argv[2]
t, l = d["totals"], d["leaks_at_exit"]
a, f, b = t["allocations"], t["frees"], t["allocated_bytes"]
lb, lk = l["definitely_lost"]["bytes"], l["definitely_lost"]["blocks"]
rb, rk = l["still_reachable"]["bytes"], l["still_reachable"]["blocks"]
for s in d["cases"][0]["sites"]:
    if module and any(module in (fr.get("module") or "") for fr in s["frames"]):
        if s["live_bytes"] != s["allocated_bytes"]:
            print("freed")
            sys.exit(0)
        a -= s["allocations"]
        b -= s["allocated_bytes"]
        lb -= s["leaked_bytes"]
        lk -= s["leaked_blocks"]
        rb -= s["live_bytes"] - s["leaked_bytes"]
        rk -= s["allocations"] - s["leaked_blocks"]
print(a, f, b, lb, lk, rb, rk)
EOF
}

record_and_report glibc -- "$FIXTURES/cxx_operators"
expect_eq "glibc: record exit status" 0 "$REC_RC"
check_fixture_sites "$WORK/glibc.json" glibc
expect_eq "glibc: definitely lost (the 8 leaked forms)" "2920 8" \
    "$(jget "$WORK/glibc.json" 'd["leaks_at_exit"]["definitely_lost"]["bytes"]') $(jget "$WORK/glibc.json" 'd["leaks_at_exit"]["definitely_lost"]["blocks"]')"

record_and_report thrown -- "$FIXTURES/cxx_operators" throw
expect_eq "throw: record exit status (bad_alloc caught)" 0 "$REC_RC"
expect_site "$WORK/thrown.json" after_throw "$(fixture_line $F LEAK-AFTER-THROW)" allocations=1 live_bytes=48 \
    leaked_bytes=48

record_and_report local -- "$FIXTURES/dlopen_cxx"
expect_eq "dlopen RTLD_LOCAL: record exit status" 0 "$REC_RC"
expect_site "$WORK/local.json" cxx_local_work "$(fixture_line lib/cxx_local.cpp LOCAL-LEAK)" allocations=1 \
    live_bytes=24 leaked_bytes=24

for allocator in "$TCMALLOC" "$JEMALLOC"; do
    [ -e "$allocator" ] || fail "$allocator is missing (make deps installs libtcmalloc-minimal4 and libjemalloc2)"
done
LD_PRELOAD=$TCMALLOC record_and_report tcmalloc -- "$FIXTURES/cxx_operators"
expect_eq "tcmalloc: record exit status" 0 "$REC_RC"
check_fixture_sites "$WORK/tcmalloc.json" tcmalloc
# tcmalloc's start-up loses one 8-byte block (a default MallocExtension it
# replaces; memcheck with tcmalloc loaded says the same): a default
# suppression hides it (report/default.supp).
expect_eq "tcmalloc: its registry block suppressed by default" "8 1 True" \
    "$(jget "$WORK/tcmalloc.json" '" ".join(str(x) for x in (d["leaks_at_exit"]["suppressed"]["bytes"], d["leaks_at_exit"]["suppressed"]["blocks"], any(u["default"] and "MallocExtension" in u["name"] for u in d["suppressions_used"])))')"
"$MEMSLOPE" report "$WORK/tcmalloc.trace" --format json --no-default-suppressions >"$WORK/tcmalloc_all.json" \
    2>"$WORK/tcmalloc_all.err" || fail "memslope report --no-default-suppressions failed on tcmalloc.trace"
LD_PRELOAD=$JEMALLOC record_and_report jemalloc -- "$FIXTURES/cxx_operators"
expect_eq "jemalloc: record exit status" 0 "$REC_RC"
check_fixture_sites "$WORK/jemalloc.json" jemalloc

if command -v valgrind >/dev/null 2>&1; then
    vg_run ops -- "$FIXTURES/cxx_operators"
    vg_totals "$(vg_log ops)"
    want="$VG_ALLOCS $VG_FREES $VG_BYTES $VG_DEF_BYTES $VG_DEF_BLOCKS $VG_REACH_BYTES $VG_REACH_BLOCKS"
    expect_eq "glibc: totals and leaks = memcheck's" "$want" "$(figures_without "$WORK/glibc.json" '')"
    expect_eq "jemalloc preloaded: totals and leaks = memcheck's on glibc" "$want" \
        "$(figures_without "$WORK/jemalloc.json" '')"
    # tcmalloc's own start-up (MallocExtension::Register) allocates with
    # operator new: 2 blocks, on top of the program's.
    expect_eq "tcmalloc's own allocations" 2 \
        "$(jget "$WORK/tcmalloc.json" 'sum(s["allocations"] for s in d["cases"][0]["sites"] if any("libtcmalloc" in (f.get("module") or "") for f in s["frames"]))')"
    expect_eq "tcmalloc preloaded: totals and leaks less tcmalloc's own = memcheck's on glibc" "$want" \
        "$(figures_without "$WORK/tcmalloc_all.json" libtcmalloc)"
    vg_run local -- "$FIXTURES/dlopen_cxx"
    vg_totals "$(vg_log local)"
    expect_eq "dlopen RTLD_LOCAL: totals and leaks = memcheck's" \
        "$VG_ALLOCS $VG_FREES $VG_BYTES $VG_DEF_BYTES $VG_DEF_BLOCKS $VG_REACH_BYTES $VG_REACH_BLOCKS" \
        "$(figures_without "$WORK/local.json" '')"
else
    log "valgrind not installed: cross-check skipped"
fi
finish
