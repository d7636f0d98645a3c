#!/bin/sh
# memslope report --format speedscope: the file speedscope opens, checked
# against the published schema's required members and index ranges, and by
# content: demo_leak's leaky_site leaks 4800 bytes (100 x 48) at its line;
# growth_cases' cases are root frames, and leaky's 48 B per iteration is the
# active profile once the model estimates growth.
. "$(dirname "$0")/lib.sh"
need_memslope
need_fixture demo_leak growth_cases
need_python

LEAK=$(fixture_line demo_leak.c DEMO-LEAK)
record "$WORK/demo.trace" -- "$FIXTURES/demo_leak"
report_format demo.speedscope.json "$WORK/demo.trace" speedscope
expect_eq "report --format speedscope exit" 0 "$RC"

if "$PY" "$E2E_DIR/check_speedscope.py" demo "$WORK/demo.speedscope.json" "$LEAK"; then
    expect_eq "speedscope demo_leak checks" ok ok
else
    expect_eq "speedscope demo_leak checks" ok failed
fi

# To stdout as well, and the same bytes.
timeout -k 5 60 "$MEMSLOPE" report "$WORK/demo.trace" --format speedscope >"$WORK/stdout.json" 2>/dev/null
expect_eq "speedscope to stdout is the same document" same \
    "$(cmp -s "$WORK/stdout.json" "$WORK/demo.speedscope.json" && echo same || echo different)"

# growth_cases: four cases, each a root frame; growth once the model has it.
record "$WORK/growth.trace" -- "$FIXTURES/growth_cases"
report_format growth.speedscope.json "$WORK/growth.trace" speedscope
expect_eq "growth_cases speedscope exit" 0 "$RC"
report_json "$WORK/growth.trace" "$WORK/growth.json"
GROWTH_KNOWN=$(jget "$WORK/growth.json" '[c["growth"] is not None for c in d["cases"] if c["name"] == "leaky"][0]')
if "$PY" "$E2E_DIR/check_speedscope.py" growth "$WORK/growth.speedscope.json" "$GROWTH_KNOWN"; then
    expect_eq "speedscope growth_cases checks" ok ok
else
    expect_eq "speedscope growth_cases checks" ok failed
fi
# speedscope itself, when installed (npm install -g speedscope, or SPEEDSCOPE_DIR
# pointing at the package): the document against its schema file, and its
# importer in headless Chromium.
SPEEDSCOPE_DIR=${SPEEDSCOPE_DIR:-$(npm root -g 2>/dev/null)/speedscope}
SCHEMA=$SPEEDSCOPE_DIR/dist/release/file-format-schema.json
if [ -f "$SCHEMA" ] && "$PY" -c 'import jsonschema' 2>/dev/null; then
    for doc in demo growth; do
        "$PY" -c 'import json, sys, jsonschema; jsonschema.validate(json.load(open(sys.argv[1])), json.load(open(sys.argv[2])))' \
            "$WORK/$doc.speedscope.json" "$SCHEMA" >"$WORK/schema.err" 2>&1
        expect_eq "$doc: valid against speedscope's file-format-schema.json" 0 $?
        [ -s "$WORK/schema.err" ] && tail -n 5 "$WORK/schema.err"
    done
else
    log "(speedscope's schema or python3-jsonschema not installed: the schema itself not applied)"
fi
CHROMIUM=$(command -v chromium || command -v chromium-browser || true)
if [ -f "$SPEEDSCOPE_DIR/dist/release/index.html" ] && [ -n "$CHROMIUM" ]; then
    # What `speedscope FILE` does: a script that hands the file to the page.
    "$PY" -c 'import base64, json, sys; print("speedscope.loadFileFromBase64(%s, %s)" % (json.dumps("growth.speedscope.json"), json.dumps(base64.b64encode(open(sys.argv[1], "rb").read()).decode())))' \
        "$WORK/growth.speedscope.json" >"$WORK/load.js"
    timeout -k 5 90 "$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
        --disable-background-networking --disable-component-update --disable-sync \
        --user-data-dir="$(mktemp -d "$WORK/profile.XXXXXX")" --enable-logging=stderr --v=0 \
        --allow-file-access-from-files --virtual-time-budget=5000 --dump-dom \
        "file://$SPEEDSCOPE_DIR/dist/release/index.html#localProfilePath=$WORK/load.js" >"$WORK/speedscope.dom" 2>"$WORK/speedscope.log"
    expect_match "speedscope imported it" 'Importing as speedscope json file' "$WORK/speedscope.log"
    expect_no_match "speedscope had no trouble" 'Failed to load|Uncaught' "$WORK/speedscope.log"
    expect_match "speedscope shows the first profile" '(growth per iteration|leaked)' "$WORK/speedscope.dom"
else
    log "(speedscope or chromium not installed: not loaded into speedscope)"
fi
finish
