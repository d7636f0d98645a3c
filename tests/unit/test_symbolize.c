/*
 * test_symbolize.c - tracer/symbols/symbolize.c and tracer/symbols/symbol_store.c against
 * this test binary (built with -g -O1, so lines and inlining are known
 * here), libc, and a small library built three ways beside it
 * (tests/unit/symbolize_library.c, the Makefile).
 */
#include <dlfcn.h>
#include <elf.h>
#include <limits.h>
#include <link.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../common/demangle.h"
#include "../../tracer/symbols/symbol_cache.h"
#include "../../tracer/symbols/symbol_store.h"
#include "../../tracer/symbols/symbolize.h"

#define NOINLINE __attribute__((noinline, noclone))

/* What the probed functions record about themselves. */
struct probe {
    void *return_address;
    int call_line;  /* line of the call whose return address was taken */
    int outer_line; /* line in the noinline caller of the inlined helper */
};

NOINLINE static void take_return_address(struct probe *probe)
{
    probe->return_address = __builtin_return_address(0);
    __asm__ volatile("" ::: "memory");
}

/* The line of the opening brace: gcc puts a function's first instruction
 * there when there is a prologue (ASan's), else on the first statement. */
enum { CALLER_ENTRY_LINE = __LINE__ + 2 };
NOINLINE static void call_with_known_line(struct probe *probe)
{
    probe->call_line = __LINE__ + 1;
    take_return_address(probe);
    __asm__ volatile("" ::: "memory"); /* no tail call: the return address stays here */
}

static inline __attribute__((always_inline)) void inlined_helper(struct probe *probe)
{
    probe->call_line = __LINE__ + 1;
    take_return_address(probe);
    __asm__ volatile("" ::: "memory");
}

NOINLINE static void calls_inlined_helper(struct probe *probe)
{
    probe->outer_line = __LINE__ + 1;
    inlined_helper(probe);
    __asm__ volatile("" ::: "memory");
}

/* Symbols with C++ names, to see them demangled and flagged. Placement new
 * (_ZnwmPv) is inline-only in C++, so defining it here replaces nothing. */
void function_named_foo_bar(void) __asm__("_ZN3foo3barEv");
NOINLINE void function_named_foo_bar(void)
{
    __asm__ volatile("" ::: "memory");
}

void *function_named_placement_new(size_t size, void *where) __asm__("_ZnwmPv");
NOINLINE void *function_named_placement_new(size_t size, void *where)
{
    __asm__ volatile("" ::: "memory");
    return (char *)where + size;
}

static const char *basename_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

struct fixture {
    struct proc_maps maps;
    struct symbol_store *store;
    struct symbolizer *symbolizer;
};

static int set_up(void **state)
{
    struct fixture *fixture = calloc(1, sizeof *fixture);
    assert_non_null(fixture);
    assert_int_equal(proc_maps_read(getpid(), &fixture->maps), 0);
    fixture->store = symbol_store_create();
    assert_non_null(fixture->store);
    fixture->symbolizer = symbolizer_create(fixture->store, &fixture->maps);
    assert_non_null(fixture->symbolizer);
    *state = fixture;
    return 0;
}

static int tear_down(void **state)
{
    struct fixture *fixture = *state;
    symbolizer_destroy(fixture->symbolizer);
    symbol_store_destroy(fixture->store);
    proc_maps_free(&fixture->maps);
    free(fixture);
    return 0;
}

static const struct trace_module *module_of(const struct symbolizer *symbolizer, const struct trace_frame *frame)
{
    size_t count;
    const struct trace_module *modules = symbolizer_modules(symbolizer, &count);
    assert_true(frame->module_id < count);
    assert_int_equal(modules[frame->module_id].module_id, frame->module_id);
    return &modules[frame->module_id];
}

static void test_function_entry_in_this_binary(void **state)
{
    struct fixture *fixture = *state;
    struct trace_frame frames[8];
    uint64_t address = (uint64_t)(uintptr_t)&call_with_known_line;
    size_t count = symbolizer_resolve(fixture->symbolizer, address, 0, frames, 8);
    assert_int_equal(count, 1);
    assert_string_equal(frames[0].function, "call_with_known_line");
    assert_string_equal(basename_of(frames[0].file), "test_symbolize.c");
    assert_in_range(frames[0].line, CALLER_ENTRY_LINE, CALLER_ENTRY_LINE + 1);
    assert_int_equal(frames[0].address, address);
    assert_int_equal(frames[0].flags, 0);

    char exe[PATH_MAX];
    ssize_t length = readlink("/proc/self/exe", exe, sizeof exe - 1);
    assert_true(length > 0);
    exe[length] = '\0';
    const struct trace_module *module = module_of(fixture->symbolizer, &frames[0]);
    assert_string_equal(module->path, exe);
    char build_id[SYMBOL_CACHE_MAX_BUILD_ID + 1];
    symbol_store_own_build_id(build_id); /* from the loaded note, not through libdwfl */
    assert_string_equal(module->build_id, build_id);
    if (build_id[0])
        assert_int_equal(strlen(module->build_id), 40); /* gcc's default sha1 */
}

static void test_return_address_gives_the_call_line(void **state)
{
    struct fixture *fixture = *state;
    struct probe probe = {0};
    call_with_known_line(&probe);
    struct trace_frame frames[8];
    size_t count = symbolizer_resolve(fixture->symbolizer, (uint64_t)(uintptr_t)probe.return_address, 1, frames, 8);
    assert_int_equal(count, 1);
    assert_string_equal(frames[0].function, "call_with_known_line");
    assert_string_equal(basename_of(frames[0].file), "test_symbolize.c");
    assert_int_equal(frames[0].line, probe.call_line);
    assert_int_equal(frames[0].address, (uint64_t)(uintptr_t)probe.return_address);
}

static void test_inlined_frames_innermost_first(void **state)
{
    struct fixture *fixture = *state;
    struct probe probe = {0};
    calls_inlined_helper(&probe);
    struct trace_frame frames[8];
    size_t count = symbolizer_resolve(fixture->symbolizer, (uint64_t)(uintptr_t)probe.return_address, 1, frames, 8);
    assert_int_equal(count, 2);
    assert_string_equal(frames[0].function, "inlined_helper");
    assert_int_equal(frames[0].flags, TRACE_FRAME_INLINED);
    assert_string_equal(basename_of(frames[0].file), "test_symbolize.c");
    assert_int_equal(frames[0].line, probe.call_line);
    assert_string_equal(frames[1].function, "calls_inlined_helper");
    assert_int_equal(frames[1].flags, 0);
    assert_string_equal(basename_of(frames[1].file), "test_symbolize.c");
    assert_int_equal(frames[1].line, probe.outer_line);
    assert_int_equal(frames[0].module_id, frames[1].module_id);
    assert_int_equal(frames[0].module_offset, frames[1].module_offset);

    /* max smaller than the inline depth keeps the innermost frames. */
    assert_int_equal(symbolizer_resolve(fixture->symbolizer, (uint64_t)(uintptr_t)probe.return_address, 1, frames, 1), 1);
    assert_string_equal(frames[0].function, "inlined_helper");
}

static void test_libc_function(void **state)
{
    struct fixture *fixture = *state;
    void *getpid_address = dlsym(RTLD_DEFAULT, "getpid");
    assert_non_null(getpid_address);
    struct trace_frame frames[8];
    size_t count = symbolizer_resolve(fixture->symbolizer, (uint64_t)(uintptr_t)getpid_address, 0, frames, 8);
    assert_true(count >= 1);
    assert_non_null(strstr(frames[count - 1].function, "getpid"));
    assert_non_null(strstr(module_of(fixture->symbolizer, &frames[0])->path, "libc.so"));
    assert_int_equal(frames[count - 1].flags & TRACE_FRAME_ALLOCATOR, 0);
    /* The offset addr2line takes: libc's first segment is at vaddr 0, so
     * its bias is its load base. */
    Dl_info info;
    assert_true(dladdr(getpid_address, &info));
    assert_int_equal(frames[0].module_offset, (uintptr_t)getpid_address - (uintptr_t)info.dli_fbase);
}

static void test_libc_malloc_is_an_allocator(void **state)
{
    struct fixture *fixture = *state;
    void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    assert_non_null(libc);
    void *malloc_address = dlsym(libc, "malloc");
    dlclose(libc);
    struct trace_frame frames[8];
    size_t count = symbolizer_resolve(fixture->symbolizer, (uint64_t)(uintptr_t)malloc_address, 0, frames, 8);
    assert_true(count >= 1);
    print_message("libc's malloc: %s\n", frames[count - 1].function);
    assert_true(frames[count - 1].flags & TRACE_FRAME_ALLOCATOR);
}

static void test_address_in_no_mapping(void **state)
{
    struct fixture *fixture = *state;
    struct trace_frame frames[8];
    assert_int_equal(symbolizer_resolve(fixture->symbolizer, 0x10, 1, frames, 8), 1);
    assert_int_equal(frames[0].module_id, TRACE_NONE);
    assert_string_equal(frames[0].function, "");
    assert_string_equal(frames[0].file, "");
    assert_int_equal(frames[0].line, 0);
    assert_int_equal(frames[0].flags, 0);
    assert_int_equal(frames[0].address, 0x10);
}

static void test_cxx_names_demangled_and_flagged(void **state)
{
    struct fixture *fixture = *state;
    struct trace_frame frames[8];
    size_t count =
        symbolizer_resolve(fixture->symbolizer, (uint64_t)(uintptr_t)&function_named_foo_bar, 0, frames, 8);
    assert_int_equal(count, 1);
    assert_string_equal(frames[0].function, "foo::bar()");
    assert_int_equal(frames[0].flags, 0);
    count = symbolizer_resolve(fixture->symbolizer, (uint64_t)(uintptr_t)&function_named_placement_new, 0, frames, 8);
    assert_int_equal(count, 1);
    assert_string_equal(frames[0].function, "operator new(unsigned long, void*)");
    assert_int_equal(frames[0].flags, TRACE_FRAME_ALLOCATOR);
}

static void test_demangle_helper(void **state)
{
    (void)state;
    char *demangled = demangle_cxx("_ZN3foo3barEv");
    assert_non_null(demangled);
    assert_string_equal(demangled, "foo::bar()");
    free(demangled);
    demangled = demangle_cxx("_ZnamRKSt9nothrow_t");
    assert_non_null(demangled);
    assert_string_equal(demangled, "operator new[](unsigned long, std::nothrow_t const&)");
    free(demangled);
    assert_null(demangle_cxx("getpid"));
    assert_null(demangle_cxx("_Znot_really_mangled"));
}

static void test_same_strings_and_cache(void **state)
{
    struct fixture *fixture = *state;
    struct probe probe = {0};
    call_with_known_line(&probe);
    struct trace_frame first[4], second[4];
    uint64_t address = (uint64_t)(uintptr_t)probe.return_address;
    assert_int_equal(symbolizer_resolve(fixture->symbolizer, address, 1, first, 4), 1);
    assert_int_equal(symbolizer_resolve(fixture->symbolizer, address, 1, second, 4), 1);
    assert_ptr_equal(first[0].function, second[0].function);
    assert_memory_equal(&first[0], &second[0], sizeof first[0]);
    /* The same address as a non-return address is a different question. */
    assert_int_equal(symbolizer_resolve(fixture->symbolizer, address, 0, second, 4), 1);
    assert_int_equal(second[0].address, address);
}

/* The maps of this process with the lines of one path rewritten by edit;
 * other lines are kept. */
static char *maps_text_with(const char *path_part, const char *(*edit)(const char *line, char *out, size_t size))
{
    FILE *file = fopen("/proc/self/maps", "r");
    assert_non_null(file);
    size_t capacity = 1 << 20, length = 0;
    char *text = calloc(1, capacity);
    char line[4096 + 256], edited[4096 + 512];
    while (fgets(line, sizeof line, file)) {
        const char *kept = strstr(line, path_part) ? edit(line, edited, sizeof edited) : line;
        size_t kept_length = strlen(kept);
        assert_true(length + kept_length < capacity);
        memcpy(text + length, kept, kept_length + 1);
        length += kept_length;
    }
    fclose(file);
    return text;
}

static const char *mark_deleted(const char *line, char *out, size_t size)
{
    snprintf(out, size, "%.*s (deleted)\n", (int)strcspn(line, "\n"), line);
    return out;
}

static const char *keep_line(const char *line, char *out, size_t size)
{
    (void)out;
    (void)size;
    return line;
}

static const char *drop_line(const char *line, char *out, size_t size)
{
    (void)line;
    (void)size;
    out[0] = '\0';
    return out;
}

/* Only libc's executable segment, as if its first mapping had been missed:
 * the bias comes from the segment's own offset. */
static const char *keep_executable_only(const char *line, char *out, size_t size)
{
    return strstr(line, " r-xp ") ? line : drop_line(line, out, size);
}

/* libc's lines twice: as mapped, and again 16 TiB lower, as if it had been
 * dlclosed and loaded again elsewhere. */
static const uint64_t second_load_below = 1ull << 44;

static const char *duplicate_lower(const char *line, char *out, size_t size)
{
    unsigned long long start, end;
    int consumed = 0;
    assert_int_equal(sscanf(line, "%llx-%llx%n", &start, &end, &consumed), 2);
    snprintf(out, size, "%s%llx-%llx%s", line, start - second_load_below, end - second_load_below, line + consumed);
    return out;
}

static void resolve_getpid_in(const char *maps_text)
{
    struct proc_maps maps;
    assert_int_equal(proc_maps_parse(maps_text, strlen(maps_text), &maps), 0);
    struct symbol_store *store = symbol_store_create();
    struct symbolizer *symbolizer = symbolizer_create(store, &maps);
    assert_non_null(symbolizer);
    struct trace_frame frames[4];
    size_t count = symbolizer_resolve(symbolizer, (uint64_t)(uintptr_t)dlsym(RTLD_DEFAULT, "getpid"), 0, frames, 4);
    assert_true(count >= 1);
    assert_non_null(strstr(frames[count - 1].function, "getpid"));
    symbolizer_destroy(symbolizer);
    symbol_store_destroy(store);
    proc_maps_free(&maps);
}

static void test_bias_from_an_executable_segment_alone(void **state)
{
    (void)state;
    char *text = maps_text_with("libc.so", keep_executable_only);
    resolve_getpid_in(text);
    free(text);
}

static void test_deleted_file_still_found_by_its_old_name(void **state)
{
    (void)state;
    char *text = maps_text_with("libc.so", mark_deleted);
    resolve_getpid_in(text);
    free(text);
}

static void test_one_module_loaded_twice(void **state)
{
    (void)state;
    char *text = maps_text_with("libc.so", duplicate_lower);
    struct proc_maps maps;
    assert_int_equal(proc_maps_parse(text, strlen(text), &maps), 0);
    struct symbol_store *store = symbol_store_create();
    struct symbolizer *symbolizer = symbolizer_create(store, &maps);
    assert_non_null(symbolizer);
    uint64_t getpid_address = (uint64_t)(uintptr_t)dlsym(RTLD_DEFAULT, "getpid");
    struct trace_frame first[4], second[4];
    size_t first_count = symbolizer_resolve(symbolizer, getpid_address, 0, first, 4);
    size_t second_count = symbolizer_resolve(symbolizer, getpid_address - second_load_below, 0, second, 4);
    assert_int_equal(first_count, second_count);
    assert_string_equal(first[first_count - 1].function, second[second_count - 1].function);
    assert_non_null(strstr(first[first_count - 1].function, "getpid"));
    assert_int_equal(first[0].module_id, second[0].module_id);
    assert_int_equal(first[0].module_offset, second[0].module_offset);
    size_t module_count;
    symbolizer_modules(symbolizer, &module_count);
    assert_int_equal(module_count, 1);
    symbolizer_destroy(symbolizer);
    symbol_store_destroy(store);
    proc_maps_free(&maps);
    free(text);
}

static void test_unreadable_file_gives_module_and_offset(void **state)
{
    (void)state;
    static const char text[] = "10000000-10002000 r--p 00004000 fe:00 1 /etc/passwd\n"
                               "20000000-20001000 r-xp 00001000 fe:00 2 /nonexistent/libgone.so (deleted)\n"
                               "30000000-30001000 rw-p 00000000 00:00 0 \n"
                               "40000000-40001000 r-xp 00000000 00:00 0 [vdso]\n";
    struct proc_maps maps;
    assert_int_equal(proc_maps_parse(text, sizeof text - 1, &maps), 0);
    struct symbol_store *store = symbol_store_create();
    struct symbolizer *symbolizer = symbolizer_create(store, &maps);
    assert_non_null(symbolizer);
    struct trace_frame frame;
    assert_int_equal(symbolizer_resolve(symbolizer, 0x20000123, 1, &frame, 1), 1);
    assert_string_equal(frame.function, "");
    assert_int_equal(frame.module_offset, 0x1123);
    assert_string_equal(module_of(symbolizer, &frame)->path, "/nonexistent/libgone.so (deleted)");
    assert_string_equal(module_of(symbolizer, &frame)->build_id, "");
    assert_int_equal(symbolizer_resolve(symbolizer, 0x10001000, 0, &frame, 1), 1);
    assert_int_equal(frame.module_offset, 0x5000);
    assert_string_equal(module_of(symbolizer, &frame)->path, "/etc/passwd");
    assert_int_equal(symbolizer_resolve(symbolizer, 0x30000010, 0, &frame, 1), 1);
    assert_int_equal(frame.module_id, TRACE_NONE);
    assert_int_equal(symbolizer_resolve(symbolizer, 0x40000010, 0, &frame, 1), 1);
    assert_int_equal(frame.module_id, TRACE_NONE);
    size_t module_count;
    symbolizer_modules(symbolizer, &module_count);
    assert_int_equal(module_count, 2); /* only the modules addresses fell into */
    symbolizer_destroy(symbolizer);
    symbol_store_destroy(store);
    proc_maps_free(&maps);
}

static double seconds_since(const struct timespec *start)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - start->tv_sec) + (double)(now.tv_nsec - start->tv_nsec) / 1e9;
}

/* Not a pass/fail figure: prints the cost of 10,000 distinct libc return
 * addresses from a fresh symbolizer, then of the same ones cached. */
static void test_ten_thousand_libc_addresses(void **state)
{
    struct fixture *fixture = *state;
    const struct proc_map *text = NULL;
    for (size_t i = 0; i < fixture->maps.count && !text; i++)
        if (strstr(fixture->maps.maps[i].path, "libc.so") && (fixture->maps.maps[i].perms & PROC_MAP_EXEC))
            text = &fixture->maps.maps[i];
    assert_non_null(text);
    enum { ADDRESSES = 10000 };
    uint64_t stride = (text->end - text->start) / ADDRESSES;
    struct timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    struct symbol_store *store = symbol_store_create();
    struct symbolizer *symbolizer = symbolizer_create(store, &fixture->maps);
    size_t named = 0;
    struct trace_frame frames[16];
    for (int i = 0; i < ADDRESSES; i++) {
        size_t count = symbolizer_resolve(symbolizer, text->start + 1 + (uint64_t)i * stride, 1, frames, 16);
        named += frames[count - 1].function[0] != '\0';
    }
    double fresh = seconds_since(&start);
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (int i = 0; i < ADDRESSES; i++)
        symbolizer_resolve(symbolizer, text->start + 1 + (uint64_t)i * stride, 1, frames, 16);
    double cached = seconds_since(&start);
    printf("symbolize: %d distinct libc addresses in %.3f s (create included; %zu named), again cached in %.4f s\n",
           ADDRESSES, fresh, named, cached);
    assert_true(named > ADDRESSES / 2);
    symbolizer_destroy(symbolizer);
    symbol_store_destroy(store);
}

/* Frames resolved with libdw, then by a second store from the symbol cache
 * the first one saved: the same frames (inlined ones and flags too), and
 * the second store reads no DWARF; a cache file damaged since is refused
 * and the frames resolved again. */
enum { CACHED_ADDRESSES = 2000, MAX_CACHED_FRAMES = 16 };

struct resolved {
    size_t count;
    struct trace_frame frames[MAX_CACHED_FRAMES];
};

static void resolve_all(struct symbol_store *store, const struct proc_maps *maps, const uint64_t *addresses,
                        struct resolved *out)
{
    struct symbolizer *symbolizer = symbolizer_create(store, maps);
    assert_non_null(symbolizer);
    for (size_t i = 0; i < CACHED_ADDRESSES; i++)
        out[i].count = symbolizer_resolve(symbolizer, addresses[i], 1, out[i].frames, MAX_CACHED_FRAMES);
    symbolizer_destroy(symbolizer);
}

static void expect_same_frames(const struct resolved *expected, const struct resolved *got)
{
    for (size_t i = 0; i < CACHED_ADDRESSES; i++) {
        assert_int_equal(got[i].count, expected[i].count);
        for (size_t f = 0; f < got[i].count; f++) {
            const struct trace_frame *a = &expected[i].frames[f], *b = &got[i].frames[f];
            assert_string_equal(b->function, a->function);
            assert_string_equal(b->file, a->file);
            assert_int_equal(b->line, a->line);
            assert_int_equal(b->flags, a->flags);
            assert_int_equal(b->module_offset, a->module_offset);
        }
    }
}

static struct symbol_store *store_with_cache(const char *folder)
{
    char err[512];
    struct symbol_store *store = symbol_store_create();
    struct symbol_cache *cache = symbol_cache_open(folder, 1 << 30, err, sizeof err);
    if (!cache)
        fail_msg("symbol_cache_open: %s", err);
    symbol_store_use_cache(store, cache);
    return store;
}

static void test_frames_from_the_symbol_cache(void **state)
{
    struct fixture *fixture = *state;
    char folder[] = "/tmp/memslope-symcache.XXXXXX", err[512];
    assert_non_null(mkdtemp(folder));
    const struct proc_map *text = NULL;
    for (size_t i = 0; i < fixture->maps.count && !text; i++)
        if (strstr(fixture->maps.maps[i].path, "libc.so") && (fixture->maps.maps[i].perms & PROC_MAP_EXEC))
            text = &fixture->maps.maps[i];
    assert_non_null(text);
    struct probe probe = {0};
    calls_inlined_helper(&probe);
    uint64_t *addresses = calloc(CACHED_ADDRESSES, sizeof *addresses);
    struct resolved *first = calloc(CACHED_ADDRESSES, sizeof *first), *second = calloc(CACHED_ADDRESSES, sizeof *second);
    uint64_t stride = (text->end - text->start) / (CACHED_ADDRESSES - 1);
    for (size_t i = 1; i < CACHED_ADDRESSES; i++)
        addresses[i] = text->start + 1 + (uint64_t)i * stride;
    addresses[0] = (uint64_t)(uintptr_t)probe.return_address; /* in an inlined helper */

    struct symbol_store *cold = store_with_cache(folder);
    resolve_all(cold, &fixture->maps, addresses, first);
    assert_int_equal(first[0].count, 2);
    assert_int_equal(first[0].frames[0].flags, TRACE_FRAME_INLINED);
    assert_int_equal(symbol_store_save_cache(cold, err, sizeof err), 0);
    struct symbol_store_stats cold_stats;
    symbol_store_stats(cold, &cold_stats);
    assert_int_equal(cold_stats.cache_files_written, 2); /* this binary's and libc's */
    assert_int_equal(symbol_store_save_cache(cold, err, sizeof err), 0);
    symbol_store_stats(cold, &cold_stats);
    assert_int_equal(cold_stats.cache_files_written, 2); /* saved once */

    struct symbol_store *warm = store_with_cache(folder);
    resolve_all(warm, &fixture->maps, addresses, second);
    expect_same_frames(first, second);
    struct symbol_store_stats warm_stats;
    symbol_store_stats(warm, &warm_stats);
    assert_int_equal(warm_stats.cache_hits, cold_stats.offsets_resolved);
    assert_int_equal(warm_stats.offsets_resolved, 0);
    assert_int_equal(warm_stats.modules_reported, 0);
    assert_int_equal(warm_stats.dwarf_loaded, 0);
    assert_int_equal(warm_stats.cache_files_read, 2);
    assert_int_equal(symbol_store_save_cache(warm, err, sizeof err), 0);
    symbol_store_stats(warm, &warm_stats);
    assert_int_equal(warm_stats.cache_files_written, 0); /* nothing new */
    symbol_store_destroy(warm);

    /* Every cache file cut short. */
    char command[256];
    snprintf(command, sizeof command, "for f in %s/*.sym; do truncate -s 100 \"$f\"; done", folder);
    assert_int_equal(system(command), 0);
    struct symbol_store *repaired = store_with_cache(folder);
    resolve_all(repaired, &fixture->maps, addresses, second);
    expect_same_frames(first, second);
    struct symbol_store_stats repaired_stats;
    symbol_store_stats(repaired, &repaired_stats);
    assert_int_equal(repaired_stats.cache_files_rejected, 2);
    assert_int_equal(repaired_stats.offsets_resolved, cold_stats.offsets_resolved);
    symbol_store_destroy(repaired);

    symbol_store_destroy(cold);
    snprintf(command, sizeof command, "rm -rf '%s'", folder);
    assert_int_equal(system(command), 0);
    free(addresses);
    free(first);
    free(second);
}

/* The warm-up fills the store: the symbolizer made at the end finds the
 * warm-up's frames there without resolving them again, whether or not the
 * image mapped another file meanwhile. */
static void test_warmup_fills_the_store(void **state)
{
    struct fixture *fixture = *state;
    struct probe probe = {0};
    call_with_known_line(&probe);
    uint64_t addresses[] = {(uint64_t)(uintptr_t)probe.return_address,
                            (uint64_t)(uintptr_t)dlsym(RTLD_DEFAULT, "getpid")};
    struct trace_frame expected[8], got[8];
    size_t expected_count = symbolizer_resolve(fixture->symbolizer, addresses[0], 1, expected, 8);

    struct symbol_store *store = symbol_store_create();
    symbolizer_warmup_finish(symbolizer_warmup_start(store, &fixture->maps, addresses, 2, 0));
    struct symbol_store_stats warm;
    symbol_store_stats(store, &warm);
    assert_int_equal(warm.offsets_resolved, 2);
    assert_int_equal(warm.modules_reported, 2); /* this binary and libc */

    /* One more file mapped since the warm-up: nothing to redo. */
    struct proc_maps more;
    assert_int_equal(proc_maps_copy(&more, &fixture->maps), 0);
    struct proc_map *grown = realloc(more.maps, (more.count + 1) * sizeof *grown);
    assert_non_null(grown);
    more.maps = grown;
    more.maps[more.count++] = (struct proc_map){
        .start = 0x1000, .end = 0x2000, .perms = PROC_MAP_READ, .path = strdup("/etc/hostname")};
    struct symbolizer *at_end = symbolizer_create(store, &more);
    assert_non_null(at_end);
    assert_int_equal(symbolizer_resolve(at_end, addresses[0], 1, got, 8), expected_count);
    assert_string_equal(got[0].function, expected[0].function);
    assert_int_equal(got[0].line, probe.call_line);
    assert_int_equal(got[0].address, addresses[0]);
    size_t modules;
    symbolizer_modules(at_end, &modules);
    assert_int_equal(modules, 1); /* module ids are the image's own, from its first address */
    struct symbol_store_stats after;
    symbol_store_stats(store, &after);
    assert_memory_equal(&after, &warm, sizeof after);
    symbolizer_destroy(at_end);
    proc_maps_free(&more);

    symbolizer_warmup_finish(NULL); /* no warm-up: nothing to end */
    symbol_store_destroy(store);
}

/* A warm-up asked to stop resolves no address after the one at hand: one
 * held at its start (the store locked) and stopped meanwhile resolves
 * none, and the store resolves them all later as usual. */
static void test_warmup_stops_when_asked(void **state)
{
    struct fixture *fixture = *state;
    uint64_t addresses[] = {(uint64_t)(uintptr_t)dlsym(RTLD_DEFAULT, "getpid"),
                            (uint64_t)(uintptr_t)dlsym(RTLD_DEFAULT, "malloc")};
    struct symbol_store *store = symbol_store_create();
    symbol_store_lock(store);
    struct symbolizer_warmup *warmup = symbolizer_warmup_start(store, &fixture->maps, addresses, 2, 0);
    assert_non_null(warmup);
    symbolizer_warmup_stop(warmup);
    symbol_store_unlock(store);
    symbolizer_warmup_finish(warmup);
    struct symbol_store_stats stats;
    symbol_store_stats(store, &stats);
    assert_int_equal(stats.offsets_resolved, 0);
    struct symbolizer *symbolizer = symbolizer_create(store, &fixture->maps);
    struct trace_frame frames[8];
    for (int i = 0; i < 2; i++)
        assert_true(symbolizer_resolve(symbolizer, addresses[i], 0, frames, 8) >= 1);
    symbol_store_stats(store, &stats);
    assert_int_equal(stats.offsets_resolved, 2);
    symbolizer_warmup_stop(NULL); /* no warm-up: nothing to stop */
    symbolizer_destroy(symbolizer);
    symbol_store_destroy(store);
}

/* A warm-up thread and the main thread resolve through one store at the
 * same time (ASan sees a use after free or a double insert if the lock
 * fails) and agree with a store used by one thread alone. */
static void test_warmup_and_main_thread_share_the_store(void **state)
{
    struct fixture *fixture = *state;
    const struct proc_map *text = NULL;
    for (size_t i = 0; i < fixture->maps.count && !text; i++)
        if (strstr(fixture->maps.maps[i].path, "libc.so") && (fixture->maps.maps[i].perms & PROC_MAP_EXEC))
            text = &fixture->maps.maps[i];
    assert_non_null(text);
    enum { ADDRESSES = 2000 };
    uint64_t *addresses = malloc(ADDRESSES * sizeof *addresses);
    assert_non_null(addresses);
    for (int i = 0; i < ADDRESSES; i++)
        addresses[i] = text->start + 1 + (uint64_t)i * ((text->end - text->start) / ADDRESSES);
    struct symbol_store *store = symbol_store_create();
    struct symbolizer_warmup *warmup = symbolizer_warmup_start(store, &fixture->maps, addresses, ADDRESSES, 0);
    assert_non_null(warmup);
    struct symbolizer *symbolizer = symbolizer_create(store, &fixture->maps);
    struct trace_frame shared[16], alone[16];
    for (int i = ADDRESSES; i-- > 0;) {
        size_t count = symbolizer_resolve(symbolizer, addresses[i], 1, shared, 16);
        assert_int_equal(symbolizer_resolve(fixture->symbolizer, addresses[i], 1, alone, 16), count);
        for (size_t f = 0; f < count; f++) {
            assert_string_equal(shared[f].function, alone[f].function);
            assert_string_equal(shared[f].file, alone[f].file);
            assert_int_equal(shared[f].line, alone[f].line);
            assert_int_equal(shared[f].module_offset, alone[f].module_offset);
        }
    }
    symbolizer_warmup_finish(warmup);
    struct symbol_store_stats stats;
    symbol_store_stats(store, &stats);
    assert_int_equal(stats.offsets_resolved, ADDRESSES); /* each once, by whichever thread came first */
    assert_int_equal(stats.files_opened, 1);
    symbolizer_destroy(symbolizer);
    symbol_store_destroy(store);
    free(addresses);
}

/* --- the library built three ways ---------------------------------------- */

struct test_library {
    void *handle;
    char path[PATH_MAX];
    uint64_t local_function; /* run-time address of its static function */
    int local_function_line; /* of its one statement */
};

static void open_test_library(const char *name, struct test_library *library)
{
    char exe[PATH_MAX];
    ssize_t length = readlink("/proc/self/exe", exe, sizeof exe - 1);
    assert_true(length > 0);
    exe[length] = '\0';
    *strrchr(exe, '/') = '\0';
    int written = snprintf(library->path, sizeof library->path, "%s/%s", exe, name);
    assert_true(written > 0 && (size_t)written < sizeof library->path);
    library->handle = dlopen(library->path, RTLD_NOW | RTLD_LOCAL);
    if (!library->handle)
        fail_msg("%s: %s (built by the Makefile beside this test)", library->path, dlerror());
    void *(*address_of)(void) = (void *(*)(void))dlsym(library->handle, "library_local_function_address");
    const int *line = dlsym(library->handle, "library_local_function_line");
    assert_non_null(address_of);
    assert_non_null(line);
    library->local_function = (uint64_t)(uintptr_t)address_of();
    library->local_function_line = *line;
}

static void close_test_library(struct test_library *library)
{
    dlclose(library->handle);
}

static const char *library_name;

/* The library's lines moved 16 TiB lower, as another image would have
 * placed it. */
static const char *shift_library_lower(const char *line, char *out, size_t size)
{
    unsigned long long start, end;
    int consumed = 0;
    if (!strstr(line, library_name))
        return line;
    assert_int_equal(sscanf(line, "%llx-%llx%n", &start, &end, &consumed), 2);
    snprintf(out, size, "%llx-%llx%s", start - second_load_below, end - second_load_below, line + consumed);
    return out;
}

static struct proc_maps maps_of(const char *text)
{
    struct proc_maps maps;
    assert_int_equal(proc_maps_parse(text, strlen(text), &maps), 0);
    return maps;
}

static void assert_same_frames(const struct trace_frame *a, const struct trace_frame *b, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        assert_string_equal(a[i].function, b[i].function);
        assert_string_equal(a[i].file, b[i].file);
        assert_int_equal(a[i].line, b[i].line);
        assert_int_equal(a[i].flags, b[i].flags);
        assert_int_equal(a[i].module_offset, b[i].module_offset);
    }
}

/* Two images with the library at different bases (a fork child, another
 * run of the same program): the same frames from one module, its debug
 * file found (through its .gnu_debuglink) and its DWARF read once, and the
 * second image's frame taken from the store's cache. */
static void test_two_images_share_one_module(void **state)
{
    (void)state;
    struct test_library library;
    open_test_library("libsymtest-debuglink.so", &library);
    library_name = "libsymtest-debuglink.so";
    char *first_text = maps_text_with("/", keep_line), *second_text = maps_text_with("/", shift_library_lower);
    struct proc_maps first_maps = maps_of(first_text), second_maps = maps_of(second_text);
    struct symbol_store *store = symbol_store_create();
    struct symbolizer *first = symbolizer_create(store, &first_maps), *second = symbolizer_create(store, &second_maps);

    struct trace_frame in_first[4], in_second[4];
    size_t count = symbolizer_resolve(first, library.local_function, 0, in_first, 4);
    assert_int_equal(count, 1);
    assert_string_equal(in_first[0].function, "library_local_function");
    assert_string_equal(basename_of(in_first[0].file), "symbolize_library.c");
    assert_in_range(in_first[0].line, library.local_function_line - 1, library.local_function_line);
    assert_int_equal(symbolizer_resolve(second, library.local_function - second_load_below, 0, in_second, 4), count);
    assert_same_frames(in_first, in_second, count);
    assert_int_equal(in_second[0].address, library.local_function - second_load_below);
    const struct trace_module *first_module = module_of(first, &in_first[0]);
    const struct trace_module *second_module = module_of(second, &in_second[0]);
    assert_string_equal(first_module->path, library.path);
    assert_string_equal(second_module->path, library.path);
    assert_int_equal(strlen(first_module->build_id), 40);
    assert_string_equal(first_module->build_id, second_module->build_id);

    struct symbol_store_stats stats;
    symbol_store_stats(store, &stats);
    assert_int_equal(stats.files_opened, 1);
    assert_int_equal(stats.modules_reported, 1);
    assert_int_equal(stats.debug_files_found, 1);
    assert_int_equal(stats.dwarf_loaded, 1);
    assert_int_equal(stats.offsets_resolved, 1);

    symbolizer_destroy(first);
    symbolizer_destroy(second);
    symbol_store_destroy(store);
    proc_maps_free(&first_maps);
    proc_maps_free(&second_maps);
    free(first_text);
    free(second_text);
    close_test_library(&library);
}

/* Stripped, with only MiniDebugInfo: the static function is named from
 * the xz-compressed symbol table of .gnu_debugdata (no DWARF, so no line). */
static void test_minidebuginfo_names_local_functions(void **state)
{
    (void)state;
    struct test_library library;
    open_test_library("libsymtest-minidebuginfo.so", &library);
    struct proc_maps maps;
    assert_int_equal(proc_maps_read(getpid(), &maps), 0);
    struct symbol_store *store = symbol_store_create();
    struct symbolizer *symbolizer = symbolizer_create(store, &maps);
    struct trace_frame frame;
    assert_int_equal(symbolizer_resolve(symbolizer, library.local_function, 0, &frame, 1), 1);
    assert_string_equal(frame.function, "library_local_function");
    assert_string_equal(frame.file, "");
    assert_int_equal(frame.line, 0);
    assert_string_equal(module_of(symbolizer, &frame)->path, library.path);
    struct symbol_store_stats stats;
    symbol_store_stats(store, &stats);
    assert_int_equal(stats.debug_files_found, 0);
    assert_int_equal(stats.dwarf_loaded, 0);
    symbolizer_destroy(symbolizer);
    symbol_store_destroy(store);
    proc_maps_free(&maps);
    close_test_library(&library);
}

static char copy_path[PATH_MAX];

static const char *also_as_copy(const char *line, char *out, size_t size)
{
    unsigned long long start, end;
    int consumed = 0;
    if (!strstr(line, library_name))
        return line;
    assert_int_equal(sscanf(line, "%llx-%llx%n", &start, &end, &consumed), 2);
    const char *path = strchr(line, '/');
    assert_non_null(path);
    int length = snprintf(out, size, "%s%llx-%llx%.*s%s\n", line, start - second_load_below,
                          end - second_load_below, (int)(path - line - consumed), line + consumed, copy_path);
    assert_true(length > 0 && (size_t)length < size);
    return out;
}

static void copy_file(const char *from, const char *to)
{
    FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
    assert_non_null(in);
    assert_non_null(out);
    char buffer[4096];
    size_t n;
    while ((n = fread(buffer, 1, sizeof buffer, in)) > 0)
        assert_int_equal(fwrite(buffer, 1, n, out), n);
    fclose(in);
    assert_int_equal(fclose(out), 0);
}

/* The library and a copy of it (another inode) in one image: with a
 * build-id they are one module; without, two. Either way both resolve,
 * and each path is a module of the image's own. */
static void resolve_library_and_copy(const char *name, size_t expected_modules)
{
    struct test_library library;
    open_test_library(name, &library);
    library_name = name;
    char folder[] = "/tmp/memslope-test-XXXXXX";
    assert_non_null(mkdtemp(folder));
    snprintf(copy_path, sizeof copy_path, "%s/%s", folder, name);
    copy_file(library.path, copy_path);
    char *text = maps_text_with("/", also_as_copy);
    struct proc_maps maps = maps_of(text);
    struct symbol_store *store = symbol_store_create();
    struct symbolizer *symbolizer = symbolizer_create(store, &maps);

    struct trace_frame original[4], copy[4];
    size_t count = symbolizer_resolve(symbolizer, library.local_function, 0, original, 4);
    assert_int_equal(symbolizer_resolve(symbolizer, library.local_function - second_load_below, 0, copy, 4), count);
    assert_string_equal(original[0].function, "library_local_function");
    assert_same_frames(original, copy, count);
    assert_string_equal(module_of(symbolizer, &original[0])->path, library.path);
    assert_string_equal(module_of(symbolizer, &copy[0])->path, copy_path);
    assert_string_equal(module_of(symbolizer, &original[0])->build_id, module_of(symbolizer, &copy[0])->build_id);
    struct symbol_store_stats stats;
    symbol_store_stats(store, &stats);
    assert_int_equal(stats.files_opened, 2);
    assert_int_equal(stats.modules_reported, expected_modules);
    assert_int_equal(stats.offsets_resolved, expected_modules);

    symbolizer_destroy(symbolizer);
    symbol_store_destroy(store);
    proc_maps_free(&maps);
    free(text);
    unlink(copy_path);
    rmdir(folder);
    close_test_library(&library);
}

static void test_copies_share_a_module_by_build_id(void **state)
{
    (void)state;
    resolve_library_and_copy("libsymtest-debuglink.so", 1);
}

static void test_without_build_id_a_file_is_its_own_module(void **state)
{
    (void)state;
    resolve_library_and_copy("libsymtest-nobuildid.so", 2);
    /* The same file in two images is still one module. */
    struct test_library library;
    open_test_library("libsymtest-nobuildid.so", &library);
    library_name = "libsymtest-nobuildid.so";
    char *text = maps_text_with("/", shift_library_lower);
    struct proc_maps first_maps, second_maps = maps_of(text);
    assert_int_equal(proc_maps_read(getpid(), &first_maps), 0);
    struct symbol_store *store = symbol_store_create();
    struct symbolizer *first = symbolizer_create(store, &first_maps), *second = symbolizer_create(store, &second_maps);
    struct trace_frame a, b;
    symbolizer_resolve(first, library.local_function, 0, &a, 1);
    symbolizer_resolve(second, library.local_function - second_load_below, 0, &b, 1);
    assert_string_equal(a.function, "library_local_function");
    assert_same_frames(&a, &b, 1);
    assert_string_equal(module_of(first, &a)->build_id, "");
    struct symbol_store_stats stats;
    symbol_store_stats(store, &stats);
    assert_int_equal(stats.files_opened, 1);
    assert_int_equal(stats.modules_reported, 1);
    symbolizer_destroy(first);
    symbolizer_destroy(second);
    symbol_store_destroy(store);
    proc_maps_free(&first_maps);
    proc_maps_free(&second_maps);
    free(text);
    close_test_library(&library);
}

/* The library's first line, preceded by its first page 8 KiB lower: what
 * the accumulated maps keep of an earlier load (dlclosed) when nothing
 * mapped since overlaps it. */
static const char *stale_first_page_below(const char *line, char *out, size_t size)
{
    unsigned long long start, end, offset;
    if (!strstr(line, library_name) || sscanf(line, "%llx-%llx %*s %llx", &start, &end, &offset) != 3 || offset != 0)
        return line;
    int written = snprintf(out, size, "%llx-%llx r--p 00000000 fe:00 1 %s%s", start - 0x2000, start - 0x1000,
                           strchr(line, '/'), line);
    assert_true(written > 0 && (size_t)written < size);
    return out;
}

/* An address in the library's code resolves from the load its code
 * mapping implies, not from the one the stale page implies, which comes
 * first by address and covers the address too. */
static void test_stale_mapping_below_a_load(void **state)
{
    (void)state;
    struct test_library library;
    open_test_library("libsymtest-nobuildid.so", &library);
    library_name = "libsymtest-nobuildid.so";
    char *text = maps_text_with("/", stale_first_page_below);
    struct proc_maps maps = maps_of(text);
    struct symbol_store *store = symbol_store_create();
    struct symbolizer *symbolizer = symbolizer_create(store, &maps);
    struct trace_frame frame;
    assert_int_equal(symbolizer_resolve(symbolizer, library.local_function, 0, &frame, 1), 1);
    assert_string_equal(frame.function, "library_local_function");
    assert_in_range(frame.line, library.local_function_line - 1, library.local_function_line);
    symbolizer_destroy(symbolizer);
    symbol_store_destroy(store);
    proc_maps_free(&maps);
    free(text);
    close_test_library(&library);
}

/* This process maps dozens of files; an address in one opens that one. */
static void test_only_the_files_addresses_fall_in_are_opened(void **state)
{
    struct fixture *fixture = *state;
    size_t files = 0;
    for (size_t i = 0; i < fixture->maps.count; i++)
        files += fixture->maps.maps[i].path[0] == '/' && fixture->maps.maps[i].offset == 0;
    assert_true(files > 5);
    struct symbol_store *store = symbol_store_create();
    struct symbolizer *symbolizer = symbolizer_create(store, &fixture->maps);
    struct symbol_store_stats stats;
    symbol_store_stats(store, &stats);
    assert_int_equal(stats.files_opened, 0);
    struct trace_frame frame;
    symbolizer_resolve(symbolizer, (uint64_t)(uintptr_t)&call_with_known_line, 0, &frame, 1);
    assert_string_equal(frame.function, "call_with_known_line");
    symbol_store_stats(store, &stats);
    assert_int_equal(stats.files_opened, 1);
    assert_int_equal(stats.modules_reported, 1);
    symbolizer_destroy(symbolizer);
    symbol_store_destroy(store);
}

/* A stack word with the top four bits set is the tag of a Python frame:
 * one unknown frame, and nothing looked up. */
static void test_python_frame_tag_is_no_address(void **state)
{
    struct fixture *fixture = *state;
    struct symbol_store *store = symbol_store_create();
    char text[128];
    snprintf(text, sizeof text, "f000000000000000-f000000000100000 r-xp 00000000 fe:00 1 %s\n", "/usr/bin/true");
    struct proc_maps maps = maps_of(text);
    struct symbolizer *symbolizer = symbolizer_create(store, &maps);
    struct trace_frame frame;
    const uint64_t tag = SYMBOLIZER_NOT_AN_ADDRESS | 0x1234;
    assert_int_equal(symbolizer_resolve(symbolizer, tag, 1, &frame, 1), 1);
    assert_int_equal(frame.module_id, TRACE_NONE);
    assert_string_equal(frame.function, "");
    assert_int_equal(frame.address, tag);
    size_t modules;
    symbolizer_modules(symbolizer, &modules);
    assert_int_equal(modules, 0);
    struct symbol_store_stats stats;
    symbol_store_stats(store, &stats);
    assert_int_equal(stats.files_opened, 0);
    /* A real address is still resolved. */
    assert_int_equal(symbolizer_resolve(fixture->symbolizer, (uint64_t)(uintptr_t)&call_with_known_line, 0, &frame, 1),
                     1);
    assert_string_equal(frame.function, "call_with_known_line");
    symbolizer_destroy(symbolizer);
    symbol_store_destroy(store);
    proc_maps_free(&maps);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_function_entry_in_this_binary, set_up, tear_down),
        cmocka_unit_test_setup_teardown(test_return_address_gives_the_call_line, set_up, tear_down),
        cmocka_unit_test_setup_teardown(test_inlined_frames_innermost_first, set_up, tear_down),
        cmocka_unit_test_setup_teardown(test_libc_function, set_up, tear_down),
        cmocka_unit_test_setup_teardown(test_libc_malloc_is_an_allocator, set_up, tear_down),
        cmocka_unit_test_setup_teardown(test_address_in_no_mapping, set_up, tear_down),
        cmocka_unit_test_setup_teardown(test_cxx_names_demangled_and_flagged, set_up, tear_down),
        cmocka_unit_test(test_demangle_helper),
        cmocka_unit_test_setup_teardown(test_same_strings_and_cache, set_up, tear_down),
        cmocka_unit_test(test_bias_from_an_executable_segment_alone),
        cmocka_unit_test(test_deleted_file_still_found_by_its_old_name),
        cmocka_unit_test(test_one_module_loaded_twice),
        cmocka_unit_test(test_unreadable_file_gives_module_and_offset),
        cmocka_unit_test_setup_teardown(test_ten_thousand_libc_addresses, set_up, tear_down),
        cmocka_unit_test_setup_teardown(test_frames_from_the_symbol_cache, set_up, tear_down),
        cmocka_unit_test_setup_teardown(test_warmup_fills_the_store, set_up, tear_down),
        cmocka_unit_test_setup_teardown(test_warmup_stops_when_asked, set_up, tear_down),
        cmocka_unit_test_setup_teardown(test_warmup_and_main_thread_share_the_store, set_up, tear_down),
        cmocka_unit_test(test_two_images_share_one_module),
        cmocka_unit_test(test_minidebuginfo_names_local_functions),
        cmocka_unit_test(test_copies_share_a_module_by_build_id),
        cmocka_unit_test(test_without_build_id_a_file_is_its_own_module),
        cmocka_unit_test(test_stale_mapping_below_a_load),
        cmocka_unit_test_setup_teardown(test_only_the_files_addresses_fall_in_are_opened, set_up, tear_down),
        cmocka_unit_test_setup_teardown(test_python_frame_tag_is_no_address, set_up, tear_down),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
