#!/bin/sh
# The default suppressions and CPython's own suppression file on Python runs
# of fixtures/python (leak_bytes(): 20 lost 4 KiB bytes objects, then one
# thread): the defaults hide nothing of the extension's leak, and what they
# hide comes out of the other categories (with the python heuristic, this
# program may leave them nothing: test_suppressions.sh shows them at work);
# CPython's file (Debian: /usr/lib/valgrind/python3.supp) reads unchanged on
# a run of the system's python3 and hides nothing of the extension's either.
. "$(dirname "$0")/lib.sh"
need_memslope
need_python

LINE=$(fixture_line python/leaky_ext.c LEAK_BYTES_LINE)
MODULE_PATH=$(dirname "$MEMSLOPE")/../lib/memslope/python

build_leaky_ext "$PY" "$WORK/ext" || skip "Python.h not found for $PY (make deps installs python3-dev)"
PYTHONPATH="$WORK/ext:$MODULE_PATH" record "$WORK/b.trace" -- "$PY" "$WORK/ext/drive_leaky.py" bytes 20
expect_eq "record exit" 0 "$REC_RC"

SITE_LEAK='"%d/%d" % ([s for s in d["cases"][0]["sites"] if any(f["function"] == "leaky_bytes" for f in s["frames"])][0]["leaked_bytes"], [s for s in d["cases"][0]["sites"] if any(f["function"] == "leaky_bytes" for f in s["frames"])][0]["leaked_blocks"])'
report_json "$WORK/b.trace" "$WORK/b.json"

# --- the default suppressions: nothing of the extension's leak ------------------------------

"$MEMSLOPE" report "$WORK/b.trace" --format json --no-default-suppressions >"$WORK/off.json" 2>/dev/null
expect_eq "defaults on or off: the extension's leak is the same" "$(jget "$WORK/off.json" "$SITE_LEAK")" \
    "$(jget "$WORK/b.json" "$SITE_LEAK")"
expect_ne "the extension's leak is there" "0/0" "$(jget "$WORK/b.json" "$SITE_LEAK")"
expect_eq "defaults off: nothing suppressed" '{"blocks": 0, "bytes": 0}' "$(jget "$WORK/off.json" 'd["leaks_at_exit"]["suppressed"]')"
expect_eq "defaults on: each category less, by what was suppressed" \
    "$(jget "$WORK/off.json" 'sum(d["leaks_at_exit"][k]["bytes"] for k in ("definitely_lost", "indirectly_lost", "possibly_lost", "still_reachable"))')" \
    "$(jget "$WORK/b.json" 'sum(d["leaks_at_exit"][k]["bytes"] for k in ("definitely_lost", "indirectly_lost", "possibly_lost", "still_reachable", "suppressed"))')"

# --- CPython's own file, unchanged -----------------------------------------------------------

CPYTHON_SUPP=/usr/lib/valgrind/python3.supp
if [ -x /usr/bin/python3 ] && [ -f "$CPYTHON_SUPP" ] && build_leaky_ext /usr/bin/python3 "$WORK/sys"; then
    PYTHONPATH="$WORK/sys:$MODULE_PATH" record "$WORK/sys.trace" -- /usr/bin/python3 "$WORK/sys/drive_leaky.py" bytes 20
    expect_eq "system python3: record exit" 0 "$REC_RC"
    "$MEMSLOPE" report "$WORK/sys.trace" --format json --no-default-suppressions >"$WORK/sys_plain.json" 2>"$WORK/sys.err"
    "$MEMSLOPE" report "$WORK/sys.trace" --format json --no-default-suppressions \
        --suppressions "$CPYTHON_SUPP" >"$WORK/sys_supp.json" 2>"$WORK/sys.err"
    expect_eq "python3.supp: exit" 0 $?
    expect_eq "python3.supp: read without a word" "" "$(cat "$WORK/sys.err")"
    expect_eq "python3.supp: the extension's leak is still there" "$(jget "$WORK/sys_plain.json" "$SITE_LEAK")" \
        "$(jget "$WORK/sys_supp.json" "$SITE_LEAK")"
    # Its Memcheck:Leak entries name frames of Pythons older than 3.8 (PyEval_InitThreads,
    # PyThread_create_key, _dl_allocate_tls_storage): on this one they match nothing.
    expect_eq "python3.supp: the figures are those without it" \
        "$(jget "$WORK/sys_plain.json" 'd["leaks_at_exit"]')" "$(jget "$WORK/sys_supp.json" 'd["leaks_at_exit"]')"
    "$MEMSLOPE" gate "$WORK/sys.trace" --max-leaked 0 --suppressions "$CPYTHON_SUPP" >"$WORK/gate.out" 2>&1
    expect_match "python3.supp: gate names the extension's function" "top site leaky_bytes \\(leaky_ext.c:$LINE\\)" "$WORK/gate.out"
else
    log "no /usr/bin/python3 with its headers and $CPYTHON_SUPP: CPython's own file not checked"
fi
finish
