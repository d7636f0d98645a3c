#!/bin/sh
# Leak categories of a CPython process are the same in every run, and
# memcheck's: a leak is definitely lost, the live program's objects are not.
# Each program is recorded RUNS times (the kernel places and merges the
# interpreter's mappings differently each time):
# - fixtures/python/leaky_ext.c's leak_bytes, 20 calls: its 20 bytes objects
#   (4096 + 33 bytes) definitely lost, every time; stale pointers in
#   pymalloc's free memory or in the shim's own caches must not turn them
#   into possibly lost ones;
# - an import of four standard modules, no leak: 0 definitely and 0
#   indirectly lost, and the same possibly lost and still reachable figures
#   in every run;
# - fixtures/python/live_frames.py: a case ends inside 200 nested calls,
#   whose frame holds three objects made in the case: all three still
#   reachable, though the frames' memory may share a mapping with an arena.
#   Before 3.11 each call's frame is an object of its own, made in the case
#   and alive at its end: 200 more blocks still reachable.
. "$(dirname "$0")/lib.sh"
need_memslope
need_python
RUNS=${RUNS:-5}

include=$($PY -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
suffix=$($PY -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
[ -f "$include/Python.h" ] || skip "Python.h not found for $PY (make deps installs python3-dev)"
cc -shared -fPIC -g -O0 -I"$include" -o "$WORK/leaky_ext$suffix" "$SRC_FIXTURES/python/leaky_ext.c" ||
    fail "cannot build the extension"
cp "$SRC_FIXTURES/python/drive_leaky.py" "$SRC_FIXTURES/python/live_frames.py" "$WORK/"
export PYTHONPATH="$WORK:$(dirname "$MEMSLOPE")/../lib/memslope/python"
LINE=$(fixture_line python/leaky_ext.c LEAK_BYTES_LINE)
FRAME_BLOCKS=$($PY -c 'import sys; print(3 if sys.version_info >= (3, 11) else 203)')

# report_all TRACE NAME: the JSON and the text, without the default
# suppressions (categories as the scan gave them).
report_all() {
    "$MEMSLOPE" report "$1" --format json --no-default-suppressions >"$WORK/$2.json" 2>"$WORK/$2.err" ||
        fail "$2: report exited $?: $(cat "$WORK/$2.err")"
    "$MEMSLOPE" report "$1" --no-default-suppressions >"$WORK/$2.txt" 2>>"$WORK/$2.err"
}

CATEGORIES='" ".join("%s %d/%d" % (k, v["bytes"], v["blocks"]) for k, v in sorted(LEAKS.items()))'

i=1
while [ $i -le "$RUNS" ]; do
    record "$WORK/b$i.trace" -- "$PY" "$WORK/drive_leaky.py" bytes 20
    expect_eq "bytes run $i: record exit" 0 "$REC_RC"
    report_all "$WORK/b$i.trace" "b$i"
    expect_eq "bytes run $i: the site's 20 blocks lost" "20 82580" \
        "$(jget "$WORK/b$i.json" "'%d %d' % [(s['leaked_blocks'], s['leaked_bytes']) for s in d['cases'][0]['sites'] if any(f['function'] == 'leaky_bytes' for f in s['frames'])][0]")"
    expect_eq "bytes run $i: definitely lost, in one loss record at leaky_bytes" 1 \
        "$(awk '/^82,580 bytes in 20 blocks are definitely lost in loss record/ { on = 1 } /^$/ { on = 0 } on' \
            "$WORK/b$i.txt" | grep -c "by leaky_bytes (.*leaky_ext.c:$LINE)")"

    record "$WORK/j$i.trace" -- "$PY" -c 'import json, email.parser, decimal, collections'
    expect_eq "imports run $i: record exit" 0 "$REC_RC"
    report_all "$WORK/j$i.trace" "j$i"
    expect_eq "imports run $i: nothing lost" "0 0" \
        "$(jget "$WORK/j$i.json" '"%d %d" % (d["leaks_at_exit"]["definitely_lost"]["blocks"], d["leaks_at_exit"]["indirectly_lost"]["blocks"])')"
    figures=$(jget "$WORK/j$i.json" "$(echo "$CATEGORIES" | sed 's/LEAKS/d["leaks_at_exit"]/')")
    if [ $i -eq 1 ]; then
        first_figures=$figures
        log "imports run 1: $figures"
    else
        expect_eq "imports run $i: the categories of run 1" "$first_figures" "$figures"
    fi

    record "$WORK/f$i.trace" -- "$PY" "$WORK/live_frames.py"
    expect_eq "frames run $i: record exit" 0 "$REC_RC"
    report_all "$WORK/f$i.trace" "f$i"
    expect_eq "frames run $i: the frame's three objects (and the frames before 3.11) still reachable" \
        "definitely_lost 0 indirectly_lost 0 possibly_lost 0 still_reachable $FRAME_BLOCKS" \
        "$(jget "$WORK/f$i.json" '" ".join("%s %d" % (k, v["blocks"]) for k, v in sorted([c for c in d["cases"] if c["name"] == "frames"][0]["leaks"].items()) if k != "suppressed")')"
    i=$((i + 1))
done
finish
