"""report_sites.py JSON FIELD FUNC LINE MODE: FIELD summed over the sites of
cases[0] (tests/e2e/lib.sh: site_get, site_any_get). MODE "inner": sites
whose innermost frame is FUNC at LINE; "any": sites with FUNC in any frame
(LINE ignored). C++ names match with or without their parameter list
("make_widget" matches "make_widget(long)"). Prints "none" when no site
matches, and lists the report's sites on stderr."""
import json, sys
path, field, func, line, mode = sys.argv[1:6]
d = json.load(open(path))
def fmatch(name):
    if not isinstance(name, str):
        return False
    return name == func or name.startswith(func + "(")
def frame_str(f):
    return "%s (%s:%s)" % (f.get("function"), f.get("file"), f.get("line"))
try:
    sites = d["cases"][0]["sites"]
except (KeyError, IndexError, TypeError):
    print("none")
    print("  the report has no cases[0].sites", file=sys.stderr)
    sys.exit(0)
total, n = 0, 0
for s in sites:
    frames = s.get("frames") or []
    if mode == "inner":
        ok = bool(frames) and fmatch(frames[0].get("function")) and str(frames[0].get("line")) == line
    else:
        ok = any(fmatch(f.get("function")) for f in frames)
    if ok:
        n += 1
        v = s.get(field)
        if v is None:
            print("MISSING")
            print("  site has no field %r: %s" % (field, json.dumps(s)[:300]), file=sys.stderr)
            sys.exit(0)
        total += v
if n == 0:
    print("none")
    print("  no site with %s %s%s; the report's sites (innermost frames first):" %
          ("innermost frame" if mode == "inner" else "a frame", func,
           ":" + line if mode == "inner" else ""), file=sys.stderr)
    for s in sites[:15]:
        fr = s.get("frames") or []
        print("    allocations=%s allocated_bytes=%s live_bytes=%s  %s" % (
            s.get("allocations"), s.get("allocated_bytes"), s.get("live_bytes"),
            " <- ".join(frame_str(f) for f in fr[:4])), file=sys.stderr)
    if len(sites) > 15:
        print("    ... %d sites in all" % len(sites), file=sys.stderr)
else:
    if isinstance(total, float) and total.is_integer():
        total = int(total)
    print(total)
