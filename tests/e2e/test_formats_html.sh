#!/bin/sh
# memslope report --format html: one self-contained page, opened in headless
# Chromium: no console errors, nothing fetched, the charts and the flame graph
# drawn (checked in the DOM the script built), a click zooms in, and
# demo_leak's leaky_site is listed with its 4800 leaked bytes. The flame graph
# draws one box per function; sites that share their user frame read apart
# by their first differing caller; the search box (#search=) filters the
# tables and highlights functions; the inverted view puts the allocating
# function at the top.
. "$(dirname "$0")/lib.sh"
need_memslope
need_fixture demo_leak growth_cases session_leak
need_chromium

record "$WORK/demo.trace" -- "$FIXTURES/demo_leak"
report_format demo.html "$WORK/demo.trace" html
expect_eq "report --format html exit" 0 "$RC"
expect_no_match "nothing loaded from the network" '(src|href)=["'"'"']?(https?:)?//' "$WORK/demo.html"

browse dom "file://$WORK/demo.html#selftest" --dump-dom
expect_quiet_console dom
D=$WORK/dom.out
expect_match "the script ran to the end" '<body[^>]* data-rendered="yes"' "$D"
expect_no_match "no script error" 'data-error=' "$D"
expect_match "heap-over-time chart drawn" '<svg[^>]* id="heap-chart"' "$D"
expect_match "the heap curve is a path" '<path[^>]* class="series"' "$D"
expect_match "flame graph drawn" '<svg[^>]* id="flame-chart"' "$D"
expect_match "leaky_site in the flame graph" '<g class="node">.*leaky_site' "$D"
expect_match "a click zoomed in" '<body[^>]* data-zoomed="[^"]+' "$D"
expect_match "leaking table lists leaky_site with 4.69 KiB (4800 B)" \
    'id="leaking-table".*4\.69 KiB.*leaky_site \(demo_leak\.c:'"$(fixture_line demo_leak.c DEMO-LEAK)"'\)' "$D"

browse shot "file://$WORK/demo.html" --screenshot="$WORK/demo.png"
expect_quiet_console shot
expect_eq "screenshot written" yes "$([ -s "$WORK/demo.png" ] && echo yes || echo no)"

# One box per function: handle_request calls render_request and leaky_site
# from two lines, and is one box above both.
browse alloc "file://$WORK/demo.html#metric=allocated" --dump-dom
expect_quiet_console alloc
expect_eq "allocated bytes: one handle_request box" 1 \
    "$(grep -o '<text[^>]*>handle_request</text>' "$WORK/alloc.out" | wc -l | tr -d ' ')"
expect_match "allocated bytes: render_request below it" '<text[^>]*>render_request</text>' "$WORK/alloc.out"

# Two callers of one allocating line, labelled apart; the search; the inverted view.
MAKE=$(fixture_line session_leak.c SL-MAKE)
USER1=$(fixture_line session_leak.c SL-USER-1)
ADMIN=$(fixture_line session_leak.c SL-ADMIN)
record "$WORK/s.trace" -- "$FIXTURES/session_leak" 1
report_format s.html "$WORK/s.trace" html
browse labels "file://$WORK/s.html" --dump-dom
expect_quiet_console labels
expect_match "label: make_session <- open_user" \
    "id=\"growing-table\".*<code class=\"site-label\">make_session \\(session_leak.c:$MAKE\\) ← open_user \\(session_leak.c:$USER1\\)</code>" "$WORK/labels.out"
expect_match "label: make_session <- open_admin" \
    "id=\"growing-table\".*<code class=\"site-label\">make_session \\(session_leak.c:$MAKE\\) ← open_admin \\(session_leak.c:$ADMIN\\)</code>" "$WORK/labels.out"
expect_match "the search box is there" '<input type="search" id="flame-search"' "$WORK/labels.out"
browse search "file://$WORK/s.html#search=open_admin" --dump-dom
expect_quiet_console search
expect_eq "search open_admin: one growing row left" 1 \
    "$(sed -n 's/.*id="growing-table"\(.*\)<\/table>.*/\1/p' "$WORK/search.out" | grep -o '<code class="site-label">' | wc -l | tr -d ' ')"
expect_match "search open_admin: that row is open_admin's" 'id="growing-table".*← open_admin' "$WORK/search.out"
expect_match "search open_admin: 48 B per iteration match" '<body[^>]* data-search-matched="48"' "$WORK/search.out"
expect_match "search open_admin: the box highlighted" '<g class="node match">' "$WORK/search.out"
browse inverted "file://$WORK/s.html#inverted" --dump-dom
expect_quiet_console inverted
expect_match "inverted view" '<body[^>]* data-flame-view="inverted"' "$WORK/inverted.out"
expect_match "inverted: the allocating function at the top" '<body[^>]* data-flame-first="make_session"' "$WORK/inverted.out"
expect_match "callers on top by default: _start first" '<body[^>]* data-flame-first="_start"' "$WORK/labels.out"

# Several cases: a chart per case.
record "$WORK/growth.trace" -- "$FIXTURES/growth_cases"
report_format growth.html "$WORK/growth.trace" html
expect_eq "growth_cases html exit" 0 "$RC"
browse growth "file://$WORK/growth.html" --dump-dom
expect_quiet_console growth
expect_match "the script ran to the end" '<body[^>]* data-rendered="yes"' "$WORK/growth.out"
expect_eq "one iteration chart per case" 4 "$(grep -o 'class="chart iteration-chart"' "$WORK/growth.out" | wc -l | tr -d ' ')"
expect_match "case leaky leaks at leak_48" 'id="leaking-table".*leak_48' "$WORK/growth.out"
if command -v python3 >/dev/null 2>&1; then
    report_json "$WORK/growth.trace" "$WORK/growth.json"
    if [ "$(jget "$WORK/growth.json" '[c["growth"] is not None for c in d["cases"] if c["name"] == "leaky"][0]')" = true ]; then
        expect_match "growing table: leak_48 at 48 B per iteration" 'id="growing-table".*48 B</td>.*leak_48' "$WORK/growth.out"
        expect_eq "a fitted line per case with growth" 4 "$(grep -o 'class="fit"' "$WORK/growth.out" | wc -l | tr -d ' ')"
    else
        log "(the report has no growth figures yet: the growing table and fitted lines not checked)"
    fi
fi
finish
