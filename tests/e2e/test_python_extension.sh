#!/bin/sh
# The example extension (fixtures/python/leakdemo.c) under the system
# interpreter with default settings, as a Python extension maintainer
# runs it: pymalloc's objects are recorded, so the forgotten Py_DECREF
# grows by exactly the list it leaks (a 56-byte list, its 32-byte item
# array and four 28-byte ints: 200 B and 6 blocks per call on 3.11), the
# dropped malloc is definitely lost (64 B a call, as memcheck finds it),
# the table filled once is setup; sites carry Python frames above the
# extension's; --iteration py:FUNCTION marks iterations with no marker in
# the code.
. "$(dirname "$0")/lib.sh"
need_memslope
PY=/usr/bin/python3
[ -x "$PY" ] || skip "no system python3 (make deps installs it)"
EXT_DIR="$(dirname "$MEMSLOPE")/../fixtures/python"
ls "$EXT_DIR"/leakdemo*.so >/dev/null 2>&1 || fail "the example extension is not built in $EXT_DIR (run: make fixtures; needs python3-dev)"
export PYTHONPATH="$EXT_DIR:$(dirname "$MEMSLOPE")/../lib/memslope/python"
unset PYTHONMALLOC PYTHONDEVMODE
ITEMS_LINE=$(fixture_line python/leakdemo.c ITEMS_LINE)
COPY_LINE=$(fixture_line python/leakdemo.c COPY_LINE)
INT_LINE=$(fixture_line python/leakdemo.c INT_LINE)
STEP_ITEMS_LINE=$(fixture_line python/bench_leakdemo.py STEP_ITEMS_LINE)
N=200

case_expr() { printf '[c for c in d["cases"] if c["name"] == "%s"][0]' "$1"; }
# the first site of a case whose frames include FUNCTION, as "function:line" of that frame
site_frame() { # JSON CASE FUNCTION
    jget "$1" "[('%s:%s' % (f['function'], f['line'])) for s in $(case_expr "$2")['sites'] for f in s['frames'] if f['function'] == '$3'][0]"
}

record "$WORK/m.trace" -- "$PY" "$EXT_DIR/bench_leakdemo.py" --markers $N
expect_eq "markers: record exit" 0 "$REC_RC"
report_json "$WORK/m.trace" "$WORK/m.json"
expect_eq "cases" "items checksum lookup" "$(jget "$WORK/m.json" '" ".join(c["name"] for c in d["cases"])')"
expect_eq "items: iterations" $N "$(jget "$WORK/m.json" "$(case_expr items)['iterations']")"
expect_eq "items: growth per iteration (the forgotten Py_DECREF)" "200 6" \
    "$(jget "$WORK/m.json" "'%g %g' % ($(case_expr items)['growth']['bytes_per_iteration'], $(case_expr items)['growth']['blocks_per_iteration'])")"
expect_eq "items: the list's site names the extension's line" "build_items:$ITEMS_LINE" \
    "$(jget "$WORK/m.json" "[('%s:%s' % (f['function'], f['line'])) for s in $(case_expr items)['sites'] if s['growth_bytes_per_iteration'] == 56.0 for f in s['frames'] if f['function'] == 'build_items'][0]")"
expect_eq "items: a Python frame above the extension's" "step_items:$STEP_ITEMS_LINE bench_leakdemo.py" \
    "$(jget "$WORK/m.json" "[('%s:%s %s' % (f['function'], f['line'], f['file'].split('/')[-1])) for s in $(case_expr items)['sites'] for f in s['frames'] if f['function'] == 'step_items'][0]")"
expect_eq "items: the Python frame comes after build_items (innermost first)" "true" \
    "$(jget "$WORK/m.json" "[[f['function'] for f in s['frames']].index('step_items') > [f['function'] for f in s['frames']].index('build_items') for s in $(case_expr items)['sites'] if s['growth_bytes_per_iteration'] == 56.0][0]")"
expect_eq "items: the interpreter's evaluation frame is replaced" "false" \
    "$(jget "$WORK/m.json" "any(f['function'] == '_PyEval_EvalFrameDefault' for s in $(case_expr items)['sites'] for f in s['frames'])")"
expect_eq "checksum: growth per iteration (the dropped malloc)" "64 1" \
    "$(jget "$WORK/m.json" "'%g %g' % ($(case_expr checksum)['growth']['bytes_per_iteration'], $(case_expr checksum)['growth']['blocks_per_iteration'])")"
expect_eq "checksum: its site" "checksum:$COPY_LINE" "$(site_frame "$WORK/m.json" checksum checksum)"
expect_eq "lookup: no growth" "0" "$(jget "$WORK/m.json" "$(case_expr lookup)['growth']['bytes_per_iteration']")"
expect_eq "lookup: the table is setup" "true" "$(jget "$WORK/m.json" "$(case_expr lookup)['setup']['bytes'] > 100 * 32")"
# memcheck (PYTHONMALLOC=malloc) finds the same at exit: 12,800 bytes in 200 blocks
expect_eq "at exit: definitely lost" "12800 200" \
    "$(jget "$WORK/m.json" "'%d %d' % (d['leaks_at_exit']['definitely_lost']['bytes'], d['leaks_at_exit']['definitely_lost']['blocks'])")"
expect_eq "nothing the marker module or ctypes allocated is lost" "false" \
    "$(jget "$WORK/m.json" "any(s['leaked_bytes'] and any(f['file'].endswith('memslope.py') or '_ctypes' in f['module'] for f in s['frames']) for c in d['cases'] for s in c['sites'])")"
expect_eq "no warning" "[]" "$(jget "$WORK/m.json" 'd["warnings"]')"
expect_eq "the report says how objects were recorded" "3.11 pymalloc-wrapped true true" \
    "$(jget "$WORK/m.json" "'%s %s %s %s' % ('.'.join(d['python']['version'].split('.')[:2]), d['python']['allocator'], str(d['python']['objects_recorded']).lower(), str(d['python']['frames']).lower())")"
expect_eq "text: the interpreter's line" 1 \
    "$("$MEMSLOPE" report "$WORK/m.trace" | grep -c "^Python 3\.11\.[0-9]*: every object recorded (pymalloc's allocator wrapped); Python frames shown$")"

# The gate names the extension's line, not the interpreter's allocating function.
"$MEMSLOPE" gate "$WORK/m.trace" --case items --max-growth 0 >"$WORK/gate.out" 2>&1
expect_eq "gate --max-growth 0 --case items: exit" 1 "$?"
log "$(cat "$WORK/gate.out")"
expect_eq "gate: the message names build_items in leakdemo.c" 1 \
    "$(grep -c "FAIL case 'items': growth 200 B per iteration > limit 0 B; top site build_items (leakdemo.c:$INT_LINE)" "$WORK/gate.out")"
"$MEMSLOPE" gate "$WORK/m.trace" --case checksum --max-leaked 0 >"$WORK/gate2.out" 2>&1
expect_eq "gate --max-leaked 0 --case checksum: exit" 1 "$?"
expect_eq "gate: the leak's site" 1 "$(grep -c "top site checksum (leakdemo.c:$COPY_LINE)" "$WORK/gate2.out")"
"$MEMSLOPE" gate "$WORK/m.trace" --case lookup --max-growth 0 --max-leaked 0 >"$WORK/gate3.out" 2>&1
expect_eq "gate on the cache alone passes" 0 "$?"
expect_eq "items: JSON names the user frame, a Python frame is marked" "build_items python" \
    "$(jget "$WORK/m.json" "[s['frames'][s['user_frame']]['function'] + ' ' + [f['module'] for f in s['frames'] if f.get('python')][0] for s in $(case_expr items)['sites'] if s['growth_bytes_per_iteration'] == 56.0][0]")"

# No marker in the code: every call of a Python function is an iteration.
record "$WORK/i.trace" --iteration py:step_items -- "$PY" "$EXT_DIR/bench_leakdemo.py" $N
expect_eq "py:step_items: record exit" 0 "$REC_RC"
report_json "$WORK/i.trace" "$WORK/i.json"
expect_eq "py:step_items: iterations" $N "$(jget "$WORK/i.json" 'd["cases"][0]["iterations"]')"
expect_eq "py:step_items: growth" "200" "$(jget "$WORK/i.json" 'd["cases"][0]["growth"]["bytes_per_iteration"]')"
record "$WORK/q.trace" --iteration py:__main__:step_checksum -- "$PY" "$EXT_DIR/bench_leakdemo.py" $N
report_json "$WORK/q.trace" "$WORK/q.json"
expect_eq "py:__main__:step_checksum: iterations" $N "$(jget "$WORK/q.json" 'd["cases"][0]["iterations"]')"
expect_eq "py:__main__:step_checksum: growth" "64" "$(jget "$WORK/q.json" 'd["cases"][0]["growth"]["bytes_per_iteration"]')"
record "$WORK/x.trace" --iteration py:elsewhere:step_items -- "$PY" "$EXT_DIR/bench_leakdemo.py" 10
report_json "$WORK/x.trace" "$WORK/x.json"
expect_eq "py: in another module: no iterations, and a warning" "true" \
    "$(jget "$WORK/x.json" 'any("py:elsewhere:step_items: the function was never called" in w for w in d["warnings"])')"

# A name matches whole: 'run' is not 'runé' (a cut conversion once matched it).
printf 'def run(): return [1]\ndef run\303\251(): return [2]\nfor _ in range(5): run\303\251()\nfor _ in range(3): run()\n' >"$WORK/names.py"
record "$WORK/n.trace" --iteration py:run -- "$PY" "$WORK/names.py"
report_json "$WORK/n.trace" "$WORK/n.json"
expect_eq "py:run counts run, not runé" 3 "$(jget "$WORK/n.json" 'd["cases"][0]["iterations"]')"
# '-X dev' after the script is the script's argument, not the interpreter's option.
printf 'import sys\nx = [str(i) for i in range(100)]\n' >"$WORK/args.py"
record "$WORK/x.trace" -- "$PY" "$WORK/args.py" -X dev
report_json "$WORK/x.trace" "$WORK/xd.json"
expect_eq "a script's '-X dev' leaves object recording on" "pymalloc-wrapped" "$(jget "$WORK/xd.json" "d['python']['allocator']")"
record "$WORK/y.trace" -- "$PY" -X dev "$WORK/args.py"
report_json "$WORK/y.trace" "$WORK/yd.json"
expect_eq "the interpreter's -X dev is the user's choice" "user" "$(jget "$WORK/yd.json" "d['python']['allocator']")"

# A PYTHONMALLOC the user chose is respected: malloc records every object too.
PYTHONMALLOC=malloc record "$WORK/p.trace" -- "$PY" "$EXT_DIR/bench_leakdemo.py" --markers $N
report_json "$WORK/p.trace" "$WORK/p.json"
expect_eq "PYTHONMALLOC=malloc: items growth" "200" "$(jget "$WORK/p.json" "$(case_expr items)['growth']['bytes_per_iteration']")"
expect_eq "PYTHONMALLOC=malloc: the allocator named" "malloc" "$(jget "$WORK/p.json" "d['python']['allocator']")"
PYTHONMALLOC=pymalloc record "$WORK/u.trace" -- "$PY" "$EXT_DIR/bench_leakdemo.py" --markers 20
report_json "$WORK/u.trace" "$WORK/u.json"
expect_eq "PYTHONMALLOC=pymalloc: the report says objects are not recorded" "true" \
    "$(jget "$WORK/u.json" 'any("objects it serves from pymalloc are not recorded" in w for w in d["warnings"])')"
expect_eq "PYTHONMALLOC=pymalloc: objects_recorded false" "user false" \
    "$(jget "$WORK/u.json" "d['python']['allocator'] + ' ' + str(d['python']['objects_recorded']).lower()")"

# build_items' line 30 allocates the list object (through _PyObject_GC_New)
# and its item array, from the same line and callers: the two sites read
# apart by the callee where their stacks first differ, in text and HTML.
"$MEMSLOPE" report "$WORK/m.trace" >"$WORK/m.txt" 2>&1
line30=$(fixture_line python/leakdemo.c ITEMS_LINE)
expect_match "text: line $line30's list object named by its callee" \
    "B/iteration +build_items \\(leakdemo.c:$line30\\) -> \\.\\.\\. -> _PyObject_GC_New" "$WORK/m.txt"
expect_match "text: ... its item array by the line alone" "B/iteration +build_items \\(leakdemo.c:$line30\\)\$" "$WORK/m.txt"
if command -v chromium >/dev/null 2>&1; then
    need_chromium
    "$MEMSLOPE" report "$WORK/m.trace" --format html -o "$WORK/m.html" 2>/dev/null
    browse mdom "file://$WORK/m.html" --dump-dom
    expect_match "html: the same callee in the tables" "build_items \\(leakdemo.c:$line30\\) → … → _PyObject_GC_New" \
        "$WORK/mdom.out"
fi
finish
