#!/bin/sh
# gcc -c: the driver forks children that exec cc1 and as. The report's
# headline is the driver, the launched command's own process, however much
# more cc1 allocates; its exit is record's. Every image is in processes;
# the driver's and as's counts equal memcheck's, cc1's frees too.
. "$(dirname "$0")/lib.sh"
need_memslope
need_python
command -v gcc >/dev/null 2>&1 || skip "gcc is not installed (make deps installs it)"

printf 'int twice(int x) { return 2 * x; }\nint main(void) { return twice(0); }\n' >"$WORK/small.c"
cd "$WORK" || fail "cannot enter $WORK"
record_and_report gcc -- gcc -O2 -c small.c -o small.o
J=$WORK/gcc.json
expect_eq "record exit status" 0 "$REC_RC"
[ -s "$WORK/small.o" ] || fail "gcc wrote no small.o under memslope"
expect_eq "headline exit (the driver's)" '{"status": 0}' "$(jget "$J" 'd["exit"]')"
expect_eq "the primary process is the driver" true \
    "$(jget "$J" '["gcc" in p["exe"].rsplit("/", 1)[-1] for p in d["processes"] if p["primary"]] == [True]')"
expect_eq "the headline totals are the driver's" true \
    "$(jget "$J" '[p["totals"] for p in d["processes"] if p["primary"]] == [d["totals"]]')"
CC1='[p for p in d["processes"] if p["exe"].endswith("/cc1")][0]'
AS='[p for p in d["processes"] if p["exe"].endswith("as") and not p["execed"]][0]'
DRIVER='[p for p in d["processes"] if p["primary"]][0]'
expect_eq "cc1 allocated more than the driver" true \
    "$(jget "$J" "$CC1[\"totals\"][\"allocations\"] > $DRIVER[\"totals\"][\"allocations\"]")"
expect_eq "cc1 and as exited 0" '[{"status": 0}, {"status": 0}]' "$(jget "$J" "[$CC1[\"exit\"], $AS[\"exit\"]]")"

if command -v valgrind >/dev/null 2>&1; then
    vg_run gcc --trace-children=yes -- gcc -O2 -c small.c -o small.o
    counts() { jget "$J" "'%d %d' % ($1[\"totals\"][\"allocations\"], $1[\"totals\"][\"frees\"])"; }
    vg_totals "$(vg_log gcc 'gcc ')"
    expect_eq "driver: allocations frees = memcheck's" "$VG_ALLOCS $VG_FREES" "$(counts "$DRIVER")"
    vg_totals "$(vg_log gcc '.*/as ')"
    expect_eq "as: allocations frees bytes = memcheck's" "$VG_ALLOCS $VG_FREES $VG_BYTES" \
        "$(jget "$J" "'%d %d %d' % ($AS[\"totals\"][\"allocations\"], $AS[\"totals\"][\"frees\"], $AS[\"totals\"][\"allocated_bytes\"])")"
    # cc1's garbage collector allocates a page-table block for each region
    # its pages fall in, which depends on where mmap puts them: not where
    # valgrind does. Its frees do not depend on it.
    vg_totals "$(vg_log gcc '.*/cc1 ')"
    expect_eq "cc1: frees = memcheck's" "$VG_FREES" "$(jget "$J" "$CC1[\"totals\"][\"frees\"]")"
else
    log "valgrind not installed: cross-check skipped"
fi
finish
