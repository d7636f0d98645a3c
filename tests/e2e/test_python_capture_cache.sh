#!/bin/sh
# One allocation reached by six paths whose innermost frames are alike
# (fixtures/python/one_place_many_paths.py), taken in turn: each path is a
# site of its own with exactly one allocation a round. The shim reuses a
# thread's recent backtraces while the words they came from hold
# (preload/capture_cache.h): a path taken for the one before it would move
# allocations from one site to another, or merge two. On every CPython
# found (cpython_interpreters): each has its own frame layout.
. "$(dirname "$0")/lib.sh"
need_memslope
need_python

SCRIPT=$SRC_FIXTURES/python/one_place_many_paths.py
F=python/one_place_many_paths.py
MAKE=$(fixture_line $F MAKE_LINE)
ROUNDS=400
expected=$(LC_ALL=C sort <<EOF
make:$MAKE main:$(fixture_line $F FIRST_LINE) <module> $ROUNDS
make:$MAKE main:$(fixture_line $F SECOND_LINE) <module> $ROUNDS
make:$MAKE left:$(fixture_line $F LEFT_LINE) main:$(fixture_line $F CALLS_LEFT) <module> $ROUNDS
make:$MAKE right:$(fixture_line $F RIGHT_LINE) main:$(fixture_line $F CALLS_RIGHT) <module> $ROUNDS
make:$MAKE main:$(fixture_line $F MAP_LINE) <module> $ROUNDS
make:$MAKE main:$(fixture_line $F SORTED_LINE) <module> $ROUNDS
EOF
)
checked=0
for py in $(cpython_interpreters); do
    version=$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
    log "== Python $version ($py)"
    record "$WORK/c.trace" -- "$py" "$SCRIPT" $ROUNDS
    expect_eq "Python $version: record exit" 0 "$REC_RC"
    report_json "$WORK/c.trace" "$WORK/c.json" --metric allocated
    # make()'s buffers (30,001 bytes) by their Python frames, each path's
    # sites summed (3.12+ specialise calls after the first ones: the same
    # Python frames with other native frames before them)
    "$PY" - "$WORK/c.json" >"$WORK/paths.txt" <<'PYEOF'
import collections, json, sys
d = json.load(open(sys.argv[1]))
paths = collections.Counter()
for s in d["cases"][0]["sites"]:
    names = [f["function"] for f in s["frames"]]
    if "make" not in names or s["allocated_bytes"] < 30000 * s["allocations"]:
        continue
    python = [f["function"].rsplit(".", 1)[-1] + (":%d" % f["line"] if f["function"] != "<module>" else "")
              for f in s["frames"] if f.get("python")]
    paths[" ".join(python)] += s["allocations"]
for path in sorted(paths):  # code point order, as LC_ALL=C sort
    print(path, paths[path])
PYEOF
    log "$(cat "$WORK/paths.txt")"
    expect_eq "Python $version: six paths, $ROUNDS allocations each" "$expected" "$(cat "$WORK/paths.txt")"
    checked=$((checked + 1))
done
[ $checked -gt 0 ] || skip "no CPython here (make deps installs python3)"
finish
