# memslope - top-level build.
#
#   make            memslope and libmemslope.so into build/
#   make deps       install the Debian packages the build and the tests need
#   make build-deps install only those the build needs
#   make check      unit tests (ASan+UBSan), end-to-end tests, a short fuzz run
#   make demo       record a bundled fixture and print its report
#   V=1             show every command (compile lines are short otherwise)
#   make install PREFIX=DIR
#   make bench      overhead benchmarks (bench/README.md)
#
# Layout of build/ mirrors an install prefix, so memslope finds its shim at
# ../lib/memslope/libmemslope.so from either place.

VERSION := 0.1.0
PREFIX ?= /usr/local
CC ?= cc
CLANG ?= clang
B := build

WARN := -Wall -Wextra -Wshadow -Wmissing-prototypes -Wformat=2 -Werror
BASE_CFLAGS := -std=gnu11 -g -O2 $(WARN) -D_GNU_SOURCE -DMEMSLOPE_VERSION='"$(VERSION)"'
CFLAGS ?=
# The tracer is built with link-time optimisation: its per-event path runs
# through recorder.c, live_table.c and shm_consumer.c, and inlining across
# them took 17% of its instructions an event (docs/performance.md). The
# shim is not: LTO made its hot path longer (callgrind, 259.8 M -> 263.4 M).
LTO_FLAGS ?= -flto=auto
ALL_CFLAGS = $(BASE_CFLAGS) $(CFLAGS)

# Parts linked into the memslope binary. cli/main.c holds main(); every
# other file is also linked into the unit tests.
CORE_DIRS := common cli tracer tracer/symbols tracer/wrappers report leakscan
CORE_SRC := $(filter-out cli/main.c,$(wildcard $(CORE_DIRS:%=%/*.c)))
CORE_OBJ := $(CORE_SRC:%.c=$(B)/obj/%.o)
CORE_LIBS := -ldw -lelf -lz -ldeflate -lstdc++ -lpthread -lm
# memslope itself takes elfutils, the compression libraries it needs,
# libdeflate and libstdc++ (the demangler) from their static archives: the
# dynamic loader then maps three libraries at each start instead of eleven
# (memslope --version: 3 ms -> 1 ms; every record, report and gate a CI loop
# runs pays it). The tests and fuzzers link CORE_LIBS, for the sanitizers.
MEMSLOPE_LIBS ?= -Wl,-Bstatic -ldw -lelf -lz -llzma -lbz2 -ldeflate -lstdc++ -Wl,-Bdynamic -lpthread -lm

# The shim. preload/shim.c defines malloc itself and cannot run under ASan;
# the other preload files are plain units that the tests link.
SHIM_SRC := $(wildcard preload/*.c) common/unwind_rules_file.c
SHIM_OBJ := $(SHIM_SRC:%.c=$(B)/shim-obj/%.o)
SHIM_UNIT_SRC := $(filter-out preload/shim.c common/%,$(SHIM_SRC))
SHIM_CFLAGS := -fPIC -ftls-model=initial-exec -fvisibility=hidden -fno-omit-frame-pointer
SHIM_LIBS := -lunwind -ldw -lelf -ldl -lpthread

MEMSLOPE := $(B)/bin/memslope
SHIM := $(B)/lib/memslope/libmemslope.so

# Unit tests: every tests/unit/test_*.c, linked against the core and the shim
# units, all built with AddressSanitizer and UndefinedBehaviorSanitizer.
SAN_FLAGS := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
UNIT_SRC := $(wildcard tests/unit/test_*.c)
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(B)/unit/%)
SAN_CORE_OBJ := $(CORE_SRC:%.c=$(B)/san-obj/%.o) $(SHIM_UNIT_SRC:%.c=$(B)/san-obj/%.o)

# Fixtures: programs with known behaviour, built without optimisation so
# that lines are exact.
FIXTURE_C := $(wildcard fixtures/*.c)
FIXTURE_CXX := $(wildcard fixtures/*.cpp)
FIXTURE_BIN := $(FIXTURE_C:fixtures/%.c=$(B)/fixtures/%) $(FIXTURE_CXX:fixtures/%.cpp=$(B)/fixtures/%)
FIXTURE_CFLAGS := -std=gnu11 -g -O0 -pthread -Iinclude -D_GNU_SOURCE

# Fuzz targets: tests/fuzz/fuzz_*.c with libFuzzer, against the core built by clang.
FUZZ_SRC := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BIN := $(FUZZ_SRC:tests/fuzz/%.c=$(B)/fuzz/%)
FUZZ_CORE_OBJ := $(CORE_SRC:%.c=$(B)/fuzz-obj/%.o)
FUZZ_FLAGS := -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all

# Commands as kbuild shows them: "  CC      build/obj/x.o" by default, the
# whole command with V=1, nothing with make -s.
V ?= 0
Q := $(if $(filter 1,$(V)),,@)
ifeq ($(V),1)
quiet =
else ifneq ($(findstring s,$(firstword -$(MAKEFLAGS))),)
quiet = @
else
quiet = @printf '  %-7s %s\n' '$(1)' '$(2)';
endif
CORES := $(shell nproc 2>/dev/null || echo 1)

.PHONY: all deps build-deps check unit e2e fuzz-smoke demo demo-run install bench clean fixtures
all: $(MEMSLOPE) $(SHIM) $(B)/include/memslope.h $(B)/lib/memslope/python/memslope.py \
    $(B)/share/memslope/default.supp

$(B)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(call quiet,CC,$@)$(CC) $(ALL_CFLAGS) $(LTO_FLAGS) -MMD -MP -c $< -o $@

$(MEMSLOPE): $(B)/obj/cli/main.o $(CORE_OBJ)
	@mkdir -p $(dir $@)
	$(call quiet,LD,$@)$(CC) $(ALL_CFLAGS) $(LTO_FLAGS) -o $@ $^ $(MEMSLOPE_LIBS)

$(B)/shim-obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(call quiet,CC,$@)$(CC) $(ALL_CFLAGS) $(SHIM_CFLAGS) -MMD -MP -c $< -o $@

$(SHIM): $(SHIM_OBJ)
	@mkdir -p $(dir $@)
	$(call quiet,LD,$@)$(CC) -shared -o $@ $^ $(SHIM_LIBS) -Wl,-z,now -Wl,-z,nodelete

$(B)/include/memslope.h: include/memslope.h
	@mkdir -p $(dir $@)
	$(call quiet,CP,$@)cp $< $@

$(B)/lib/memslope/python/memslope.py: python/memslope.py
	@mkdir -p $(dir $@)
	$(call quiet,CP,$@)cp $< $@

# The default suppressions, found at ../share/memslope/ from the binary.
$(B)/share/memslope/default.supp: report/default.supp
	@mkdir -p $(dir $@)
	$(call quiet,CP,$@)cp $< $@

$(B)/san-obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(call quiet,CC,$@)$(CC) $(ALL_CFLAGS) $(SAN_FLAGS) -O1 -MMD -MP -c $< -o $@

$(B)/libcore-san.a: $(SAN_CORE_OBJ)
	$(call quiet,AR,$@)rm -f $@ && ar rcs $@ $^

$(B)/unit/%: tests/unit/%.c $(B)/libcore-san.a
	@mkdir -p $(dir $@)
	$(call quiet,LD,$@)$(CC) $(ALL_CFLAGS) $(SAN_FLAGS) -O1 -o $@ $< $(B)/libcore-san.a $(CORE_LIBS) -lunwind -lcmocka

# test_symbolize loads one small library built three ways: its debug info
# in a separate file found through .gnu_debuglink, only MiniDebugInfo, and
# no build-id (tests/unit/symbolize_library.c).
SYMTEST_LIBS := $(B)/unit/libsymtest-debuglink.so $(B)/unit/libsymtest-minidebuginfo.so \
	$(B)/unit/libsymtest-nobuildid.so
$(B)/unit/test_symbolize: $(SYMTEST_LIBS)

$(B)/unit/libsymtest-full.so: tests/unit/symbolize_library.c
	@mkdir -p $(dir $@)
	$(call quiet,LD,$@)$(CC) $(ALL_CFLAGS) -O1 -fPIC -shared -Wl,--build-id -o $@ $<

$(B)/unit/libsymtest-debuglink.so: $(B)/unit/libsymtest-full.so
	$(call quiet,OBJCOPY,$@)objcopy --only-keep-debug $< $@.debug
	$(Q)strip --strip-all -o $@ $<
	$(Q)objcopy --add-gnu-debuglink=$@.debug $@

$(B)/unit/libsymtest-minidebuginfo.so: $(B)/unit/libsymtest-full.so tests/unit/make-minidebuginfo.sh
	$(call quiet,GEN,$@)tests/unit/make-minidebuginfo.sh $< $@

$(B)/unit/libsymtest-nobuildid.so: tests/unit/symbolize_library.c
	@mkdir -p $(dir $@)
	$(call quiet,LD,$@)$(CC) $(ALL_CFLAGS) -O1 -fPIC -shared -Wl,--build-id=none -o $@ $<

$(B)/fixtures/%: fixtures/%.c include/memslope.h fixtures/say_pid_and_wait.h
	@mkdir -p $(dir $@)
	$(call quiet,CC,$@)$(CC) $(FIXTURE_CFLAGS) -o $@ $< -ldl

$(B)/fixtures/%: fixtures/%.cpp
	@mkdir -p $(dir $@)
	$(call quiet,CXX,$@)$(CXX) -g -O0 -pthread -Iinclude -o $@ $<

# A C++ library that fixtures/dlopen_cxx.c loads with RTLD_LOCAL.
FIXTURE_LIBS := $(B)/fixtures/libcxx_local.so
$(B)/fixtures/libcxx_local.so: fixtures/lib/cxx_local.cpp
	@mkdir -p $(dir $@)
	$(call quiet,CXX,$@)$(CXX) -g -O0 -shared -fPIC -o $@ $<

# The example Python extension (fixtures/python), built for the system
# interpreter the Python tests and the walkthrough use; python3-dev (make
# deps) provides its headers.
SYSTEM_PYTHON ?= /usr/bin/python3
PY_INCLUDES := $(shell $(SYSTEM_PYTHON)-config --includes 2>/dev/null)
PY_EXT_SUFFIX := $(shell $(SYSTEM_PYTHON)-config --extension-suffix 2>/dev/null)
PY_EXTENSION := $(if $(PY_INCLUDES),$(B)/fixtures/python/leakdemo$(PY_EXT_SUFFIX))

$(B)/fixtures/python/leakdemo$(PY_EXT_SUFFIX): fixtures/python/leakdemo.c
	@mkdir -p $(dir $@)
	$(call quiet,CC,$@)$(CC) -shared -fPIC -g -O0 -Wall -Wextra -Werror $(PY_INCLUDES) -o $@ $<
	$(Q)cp fixtures/python/bench_leakdemo.py $(dir $@)

fixtures: $(FIXTURE_BIN) $(FIXTURE_LIBS) $(PY_EXTENSION)

$(B)/fuzz-obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(call quiet,CLANG,$@)$(CLANG) $(BASE_CFLAGS) -Wno-unused-command-line-argument $(FUZZ_FLAGS) -O1 -MMD -MP -c $< -o $@

$(B)/libcore-fuzz.a: $(FUZZ_CORE_OBJ)
	$(call quiet,AR,$@)rm -f $@ && ar rcs $@ $^

# Through an archive: a target pulls in only the objects it needs.
$(B)/fuzz/%: tests/fuzz/%.c $(B)/libcore-fuzz.a
	@mkdir -p $(dir $@)
	$(call quiet,LD,$@)$(CLANG) $(BASE_CFLAGS) -fsanitize=fuzzer,address,undefined -O1 -o $@ $^ $(CORE_LIBS)

# --- set-up and tests --------------------------------------------------------

# Missing Debian packages, after apt-get update: every one the build and the
# tests use (deps), or only those the build needs (build-deps).
deps:
	@./tests/install-deps.sh all

build-deps:
	@./tests/install-deps.sh build

unit: $(UNIT_BIN)
	@./tests/run-unit.sh $(UNIT_BIN)

e2e: all fixtures
	@./tests/e2e/run.sh

fuzz-smoke: $(FUZZ_BIN)
	@./tests/fuzz/run.sh smoke $(FUZZ_BIN)

# Builds everything on every core unless -j says otherwise, silently unless
# V=1, then runs every suite, even after one failed; each prints one line
# unless a test fails, and the last line sums up.
BUILD_JOBS = $(if $(filter -j%,$(MAKEFLAGS)),,-j$(CORES))
check: deps
	@$(MAKE) $(if $(filter 1,$(V)),,-s) --no-print-directory $(BUILD_JOBS) all fixtures $(UNIT_BIN) $(FUZZ_BIN)
	@start=$$(date +%s) failed=""; \
	./tests/run-unit.sh $(UNIT_BIN) || failed="$$failed unit"; \
	./tests/e2e/run.sh || failed="$$failed e2e"; \
	./tests/fuzz/run.sh smoke $(FUZZ_BIN) || failed="$$failed fuzz"; \
	secs=$$(($$(date +%s) - start)); \
	if [ -z "$$failed" ]; then echo "check: unit, e2e and fuzz passed in $${secs}s"; \
	else echo "check: FAILED:$$failed (in $${secs}s)"; exit 1; fi

# Only what the demo needs: no test tool, no other fixture. It builds in a
# second make, once build-deps has installed the compilers.
demo: build-deps
	@$(MAKE) --no-print-directory demo-run

demo-run: all $(B)/fixtures/demo_leak
	./$(MEMSLOPE) record -o $(B)/demo.trace -- ./$(B)/fixtures/demo_leak
	./$(MEMSLOPE) report $(B)/demo.trace

bench: all fixtures
	$(MAKE) -C bench

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib/memslope/python \
	    $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/share/man/man1 $(DESTDIR)$(PREFIX)/share/memslope
	install -m 755 $(MEMSLOPE) $(DESTDIR)$(PREFIX)/bin/memslope
	install -m 755 $(SHIM) $(DESTDIR)$(PREFIX)/lib/memslope/libmemslope.so
	install -m 644 include/memslope.h $(DESTDIR)$(PREFIX)/include/memslope.h
	install -m 644 python/memslope.py $(DESTDIR)$(PREFIX)/lib/memslope/python/memslope.py
	install -m 644 docs/memslope.1 $(DESTDIR)$(PREFIX)/share/man/man1/memslope.1
	install -m 644 report/default.supp $(DESTDIR)$(PREFIX)/share/memslope/default.supp

clean:
	rm -rf $(B)

-include $(shell find $(B) -name '*.d' 2>/dev/null)
