#!/bin/sh
# Debug info from debuginfod only when DEBUGINFOD_URLS is set: demo_leak
# without its DWARF (kept on a local stand-in server, by build-id) has no
# file and line offline, and asks nothing of the server; with the variable
# set, memslope fetches the debug file once and the leaking site has its
# file and line.
. "$(dirname "$0")/lib.sh"
need_memslope
need_fixture demo_leak
need_python
command -v objcopy >/dev/null 2>&1 && command -v strip >/dev/null 2>&1 || skip "binutils is not installed"
unset DEBUGINFOD_URLS

LEAK=$(fixture_line demo_leak.c DEMO-LEAK)
cp "$FIXTURES/demo_leak" "$WORK/demo"
BUILD_ID=$(readelf -n "$WORK/demo" | awk '/Build ID/ { print $3 }')
[ -n "$BUILD_ID" ] || fail "build/fixtures/demo_leak has no build-id note"
mkdir -p "$WORK/server/buildid/$BUILD_ID"
objcopy --only-keep-debug "$WORK/demo" "$WORK/server/buildid/$BUILD_ID/debuginfo"
strip --strip-debug "$WORK/demo"

# The server: files under $WORK/server, its port in $WORK/port, each
# request's path in $WORK/requests.
"$PY" - "$WORK" <<'EOF' &
import functools, http.server, sys
work = sys.argv[1]
class Handler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):
        with open(work + "/requests", "a") as log:
            log.write(self.path + "\n")
server = http.server.HTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=work + "/server"))
with open(work + "/port.tmp", "w") as port:
    port.write(str(server.server_address[1]))
import os
os.rename(work + "/port.tmp", work + "/port")
server.serve_forever()
EOF
SERVER=$!
trap 'kill $SERVER 2>/dev/null' EXIT
for _ in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do
    [ -f "$WORK/port" ] && break
    sleep 0.25
done
[ -f "$WORK/port" ] || fail "the stand-in debuginfod server did not start"
URL=http://127.0.0.1:$(cat "$WORK/port")

leak_frame() {
    jget "$1" '[f["file"].rsplit("/",1)[-1] + ":" + str(f["line"]) for s in d["cases"][0]["sites"] for f in s["frames"][:1] if f["function"]=="leaky_site"][0]'
}

record_and_report offline -- "$WORK/demo"
expect_eq "offline: leaky_site named from .symtab, no file or line" ":0" "$(leak_frame "$WORK/offline.json")"
expect_eq "offline: no request to the server" "" "$(cat "$WORK/requests" 2>/dev/null)"

export DEBUGINFOD_URLS="$URL" DEBUGINFOD_CACHE_PATH="$WORK/cache"
record_and_report online -- "$WORK/demo"
unset DEBUGINFOD_URLS DEBUGINFOD_CACHE_PATH
expect_eq "DEBUGINFOD_URLS set: leaky_site has its file and line" "demo_leak.c:$LEAK" "$(leak_frame "$WORK/online.json")"
expect_eq "DEBUGINFOD_URLS set: demo's debug info asked for once" 1 \
    "$(grep -c "^/buildid/$BUILD_ID/debuginfo\$" "$WORK/requests")"
finish
