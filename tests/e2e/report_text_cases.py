"""report_text_cases.py TXT JSON: every JSON case's figures on its lines of
the text report (test_report_text.sh: check_cases); one MISMATCH line per
problem and exit 1 if there is any."""
import json, re, sys
text, d = open(sys.argv[1]).read(), json.load(open(sys.argv[2]))
text = text[text.index("\nCase"):]  # the case sections (the summary line also starts with the command)
def commas(n): return format(n, ",")
problems = []
for c in d["cases"]:
    m = re.search(r"^%s: (.*)\n((?:  .*\n)*)" % re.escape(c["name"]), text, re.M)
    if not m:
        problems.append("no section for case %s" % c["name"]); continue
    head, body = m.group(1), m.group(2)
    its = "%s iteration%s" % (commas(c["iterations"]), "" if c["iterations"] == 1 else "s") if c["iterations"] else "no iterations"
    if not head.startswith(its + "; peak %s bytes" % commas(c["peak_bytes"])):
        problems.append("%s: head '%s' (want %s, peak %s)" % (c["name"], head, its, c["peak_bytes"]))
    if c["setup"] is None:
        if "setup, growth: not estimated" not in body: problems.append("%s: setup not said to be unknown" % c["name"])
        if re.search(r"^  setup: ", body, re.M): problems.append("%s: a setup figure without iterations" % c["name"])
    elif not re.search(r"^  setup:  %s bytes( \([^)]*\))? in %s block" % (commas(c["setup"]["bytes"]), commas(c["setup"]["blocks"])), body, re.M):
        problems.append("%s: setup %s not in %r" % (c["name"], c["setup"], body))
    if c["growth"] is not None and not re.search(r"^  growth: %.1f B per iteration \(%.1f blocks\)" % (
            c["growth"]["bytes_per_iteration"], c["growth"]["blocks_per_iteration"]), body, re.M):
        problems.append("%s: growth %s not in %r" % (c["name"], c["growth"], body))
    l = c["leaks"]
    lost = l["definitely_lost"]["bytes"] + l["indirectly_lost"]["bytes"]
    blocks = l["definitely_lost"]["blocks"] + l["indirectly_lost"]["blocks"]
    if not re.search(r"^  leaked: %s bytes( \([^)]*\))? in %s block" % (commas(lost), commas(blocks)), body, re.M):
        problems.append("%s: leaked %d in %d not in %r" % (c["name"], lost, blocks, body))
    # The growing sites, named by their user frame, in the JSON's order.
    growing = [s for s in c["sites"] if (s["growth_bytes_per_iteration"] or 0) >= 0.05]
    if growing:
        s = growing[0]
        f = s["frames"][s["user_frame"]]
        want = r"^    %.1f B/iteration +%s \(%s:%d\)" % (s["growth_bytes_per_iteration"], re.escape(f["function"]),
                                                        re.escape(f["file"].split("/")[-1]), f["line"])
        if not re.search(want, body, re.M): problems.append("%s: top growing site /%s/ not in %r" % (c["name"], want, body))
    leaking = sorted((s for s in c["sites"] if s["leaked_bytes"]), key=lambda s: -s["leaked_bytes"])
    if leaking:
        s = leaking[0]
        f = s["frames"][s["user_frame"]]
        want = r"^    %s B in %s blocks? +%s \(" % (commas(s["leaked_bytes"]), commas(s["leaked_blocks"]), re.escape(f["function"]))
        if not re.search(want, body, re.M): problems.append("%s: top leaking site /%s/ not in %r" % (c["name"], want, body))
for p in problems: print("MISMATCH", p)
print("%d cases compared" % len(d["cases"]))
sys.exit(1 if problems else 0)
