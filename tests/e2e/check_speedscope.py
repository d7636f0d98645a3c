"""check_speedscope.py: test_formats_speedscope.sh's checks of a speedscope
document, one MISMATCH line per problem and exit 1 if there is any.
  check_speedscope.py demo FILE LEAK_LINE       demo_leak's document, against
                                                the schema's required members
  check_speedscope.py growth FILE GROWTH_KNOWN  growth_cases' (GROWTH_KNOWN:
                                                true when the report has growth)"""
import json, sys


def demo(path, leak_line):
    leak_line = int(leak_line)
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


def growth(path, growth_known):
    d = json.load(open(path))
    growth_known = growth_known == "true"
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


if __name__ == "__main__":
    {"demo": demo, "growth": growth}[sys.argv[1]](*sys.argv[2:])
