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

# report_to OUT TRACE FORMAT [OPTION...]: memslope report ... -o $WORK/OUT;
# sets RC. Skips while cmd_report does not know the format yet.
report_to() {
    _out=$WORK/$1 _trace=$2 _format=$3
    shift 3
    log "\$ memslope report $_trace --format $_format $* -o $_out"
    timeout -k 5 60 "$MEMSLOPE" report "$_trace" --format "$_format" "$@" -o "$_out" 2>"$_out.err"
    RC=$?
    log "  -> exit $RC"
    [ -s "$_out.err" ] && sed 's/^/    | /' "$_out.err" | head -n 10
    if grep -q "unknown format" "$_out.err"; then
        skip "memslope report does not offer --format $_format yet (report/cmd_report.c must wire report/formats.h)"
    fi
    return 0
}

LEAK=$(fixture_line demo_leak.c DEMO-LEAK)
record "$WORK/demo.trace" -- "$FIXTURES/demo_leak"
report_to demo.speedscope.json "$WORK/demo.trace" speedscope
expect_eq "report --format speedscope exit" 0 "$RC"

cat >"$WORK/check.py" <<'PY'
import json, sys
path, leak_line = sys.argv[1], int(sys.argv[2])
d = json.load(open(path))
problems = []
def need(cond, what):
    if not cond:
        problems.append(what)
# The schema's required members (file-format-schema.json: FileFormat.File,
# SampledProfile, Frame).
for key in ("$schema", "shared", "profiles"):
    need(key in d, "top-level member %s" % key)
need(d.get("$schema") == "https://www.speedscope.app/file-format-schema.json", "$schema URL")
need(d.get("exporter", "").startswith("memslope@"), "exporter memslope@VERSION")
frames = d["shared"]["frames"]
need(all(isinstance(f.get("name"), str) for f in frames), "every frame has a name")
for p in d["profiles"]:
    for key in ("type", "name", "unit", "startValue", "endValue", "samples", "weights"):
        need(key in p, "profile %s has %s" % (p.get("name"), key))
    need(p["type"] == "sampled", "sampled profile")
    need(p["unit"] in ("bytes", "none"), "unit bytes or none")
    need(len(p["samples"]) == len(p["weights"]) > 0, "%s: samples and weights pair up" % p["name"])
    need(all(isinstance(i, int) and 0 <= i < len(frames) for s in p["samples"] for i in s), "%s: frame indexes in range" % p["name"])
    need(abs(p["endValue"] - p["startValue"] - sum(p["weights"])) < 1e-6, "%s: endValue is the total" % p["name"])
need(0 <= d.get("activeProfileIndex", -1) < len(d["profiles"]), "activeProfileIndex in range")
by_name = {p["name"]: p for p in d["profiles"]}
print("profiles:", list(by_name), "active:", d["profiles"][d["activeProfileIndex"]]["name"])
need("growth per iteration" not in by_name, "no growth profile without iterations")
need(d["profiles"][d["activeProfileIndex"]]["name"] == "leaked", "leaked is active without growth")
leaked = by_name["leaked"]
hits = [(w, [frames[i] for i in s]) for s, w in zip(leaked["samples"], leaked["weights"])
        if frames[s[-1]]["name"] == "leaky_site"]
need(len(hits) == 1, "one leaked sample ends in leaky_site")
if hits:
    weight, stack = hits[0]
    need(weight == 4800, "leaky_site leaked 4800 bytes (got %s)" % weight)
    need(stack[-1].get("file", "").endswith("demo_leak.c") and stack[-1].get("line") == leak_line,
         "leaky_site frame at demo_leak.c:%d (got %s)" % (leak_line, stack[-1]))
    need([f["name"] for f in stack[-3:]] == ["main", "handle_request", "leaky_site"], "root first: main, handle_request, leaky_site")
# One frame per function: handle_request calls from two lines, main once per function.
need([f["name"] for f in frames].count("handle_request") == 1, "one handle_request frame")
need(sum(by_name["allocations"]["weights"]) == 217 and by_name["allocations"]["unit"] == "none", "217 allocations, unit none")
need(sum(by_name["allocated bytes"]["weights"]) == 31552, "31552 bytes allocated")
need(sum(by_name["live at peak"]["weights"]) == 6208, "6208 bytes live at peak")
for p in problems:
    print("MISMATCH", p)
sys.exit(1 if problems else 0)
PY
if "$PY" "$WORK/check.py" "$WORK/demo.speedscope.json" "$LEAK"; then
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
report_to growth.speedscope.json "$WORK/growth.trace" speedscope
expect_eq "growth_cases speedscope exit" 0 "$RC"
report_json "$WORK/growth.trace" "$WORK/growth.json"
GROWTH_KNOWN=$(jget "$WORK/growth.json" '[c["growth"] is not None for c in d["cases"] if c["name"] == "leaky"][0]')
cat >"$WORK/check_growth.py" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
growth_known = sys.argv[2] == "true"
frames = d["shared"]["frames"]
by_name = {p["name"]: p for p in d["profiles"]}
problems = []
def weight_of(profile, case, leaf):
    return sum(w for s, w in zip(profile["samples"], profile["weights"])
               if frames[s[0]]["name"] == "[case %s]" % case and frames[s[-1]]["name"] == leaf)
if "leaked" not in by_name:
    problems.append("no leaked profile")
elif weight_of(by_name["leaked"], "leaky", "leak_48") != 4800:
    problems.append("case leaky leaked %s at leak_48, expected 4800" % weight_of(by_name["leaked"], "leaky", "leak_48"))
if growth_known:
    g = by_name.get("growth per iteration")
    if not g:
        problems.append("growth is estimated but there is no growth profile")
    else:
        w = weight_of(g, "leaky", "leak_48")
        if abs(w - 48) > 1:
            problems.append("case leaky grows %s B/iteration at leak_48, expected 48" % w)
        if d["profiles"][d["activeProfileIndex"]] is not g:
            problems.append("growth is not the active profile")
elif "growth per iteration" in by_name:
    problems.append("a growth profile although the model has no growth figures")
print("profiles:", list(by_name), "growth known:", growth_known)
for p in problems:
    print("MISMATCH", p)
sys.exit(1 if problems else 0)
PY
if "$PY" "$WORK/check_growth.py" "$WORK/growth.speedscope.json" "$GROWTH_KNOWN"; then
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
