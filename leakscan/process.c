/*
 * process.c - the leak scan of a stopped process (leakscan_process): roots
 * from /proc/PID/maps and the threads' registers, memory through
 * struct leakscan_target, the classification in classify.c.
 */
#include "leakscan_internal.h"

#include <elf.h>
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <unistd.h>

#include "../common/error_buffer.h"
#include "../common/growable_array.h"
#include "../common/proc_maps.h"

#define RED_ZONE 128u           /* x86-64 ABI: below SP, still the function's */
#define TLS_BELOW_FS (16u << 10) /* static TLS blocks sit below the thread pointer */
#define TLS_ABOVE_FS (4u << 10)  /* struct pthread (the TCB) above it */
#define VTABLE_MAX_CHECK 20u    /* memcheck's limit */
#define TCB_SEARCH (64u << 10)   /* a thread's TCB is this close to its stack's top */
#define DEAD_TLS_BELOW 1024u     /* libc's own TLS (and small __thread data) below it */
#define SPARSE_MAPPING (1ull << 30)   /* above this, only present pages are scanned */
#define RESERVATION (256ull << 30)    /* above this, an anonymous mapping is a reservation
                                       * (sanitizer shadow, runtime heaps): not scanned */

/* ---- growable root lists ------------------------------------------------- */

struct roots {
    struct leakscan_range *ranges;
    size_t count, capacity;
    uint64_t *words;
    size_t word_count, word_capacity;
};

static int add_range(struct roots *r, uint64_t start, uint64_t end)
{
    if (end <= start)
        return 0;
    if (growable_array_reserve(&r->ranges, &r->capacity, r->count + 1, sizeof *r->ranges) < 0)
        return -1;
    r->ranges[r->count++] = (struct leakscan_range){start, end};
    return 0;
}

static int add_word(struct roots *r, uint64_t word)
{
    if (growable_array_reserve(&r->words, &r->word_capacity, r->word_count + 1, sizeof *r->words) < 0)
        return -1;
    r->words[r->word_count++] = word;
    return 0;
}

/* ---- blocks by address --------------------------------------------------- */

/* Bytes of blocks inside [start, end). */
static uint64_t block_bytes_in(const struct leakscan_block *extents, size_t count, uint64_t start, uint64_t end)
{
    uint64_t bytes = 0;
    for (size_t i = leakscan_first_block_ending_after(extents, count, start); i < count && extents[i].address < end; i++) {
        uint64_t block_end = leakscan_block_end(&extents[i]);
        bytes += (block_end < end ? block_end : end) - (extents[i].address > start ? extents[i].address : start);
    }
    return bytes;
}


static int compare_ranges(const void *a, const void *b)
{
    const struct leakscan_range *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start;
}

/* Adds [start, end) minus the blocks in it as roots. */
static int add_range_around_blocks(struct roots *r, const struct leakscan_block *extents, size_t count,
                                   uint64_t start, uint64_t end)
{
    uint64_t at = start;
    for (size_t i = leakscan_first_block_ending_after(extents, count, start); i < count && extents[i].address < end; i++) {
        if (extents[i].address > at && add_range(r, at, extents[i].address) < 0)
            return -1;
        if (leakscan_block_end(&extents[i]) > at)
            at = leakscan_block_end(&extents[i]);
    }
    return add_range(r, at, end);
}

/* ---- which mappings are roots -------------------------------------------- */

static bool starts_with(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* The profiler's own memory: its shared memory holds every block address. */
static bool is_profiler_mapping(const char *path)
{
    return starts_with(path, "/memfd:memslope") || strstr(path, "/libmemslope.so") != NULL;
}

static bool is_anonymous(const char *path)
{
    return path[0] == '\0' || starts_with(path, "[anon:") || starts_with(path, "[stack");
}

/* Mappings memcheck never scans: kernel pages, devices, unreadable. */
static bool is_never_root(const struct proc_map *map)
{
    const char *path = map->path;
    if ((map->perms & (PROC_MAP_READ | PROC_MAP_WRITE)) != (PROC_MAP_READ | PROC_MAP_WRITE))
        return true;
    if (path[0] == '[' && !starts_with(path, "[stack") && !starts_with(path, "[anon:"))
        return true; /* [heap], [vvar], [vsyscall], [vdso], [uprobes] */
    if (starts_with(path, "/dev/") && strcmp(path, "/dev/zero") != 0 && !starts_with(path, "/dev/shm/"))
        return true;
    return is_profiler_mapping(path);
}

/* An anonymous mapping right after libmemslope.so's last mapping begins
 * with its .bss. (Not after the memfd: whatever the kernel puts next to the
 * shared memory is the program's.) */
static bool is_profiler_bss(const struct proc_maps *maps, size_t i)
{
    return i > 0 && is_anonymous(maps->maps[i].path) && maps->maps[i - 1].end == maps->maps[i].start &&
           strstr(maps->maps[i - 1].path, "/libmemslope.so") != NULL;
}

/* Where libmemslope.so's image ends, .bss included (its highest PT_LOAD's
 * end, page-rounded), from the ELF header its offset-0 mapping holds: the
 * kernel merges whatever anonymous mapping comes next (a CPython frame
 * stack) into the .bss mapping. UINT64_MAX when unknown: the whole mapping
 * is then taken for the .bss. */
static uint64_t profiler_image_end(const struct proc_maps *maps, size_t bss, struct leakscan_target *target)
{
    /* the loaded image's first mapping: back through the run of mappings
     * of the file that ends at the .bss (elfutils may map the file
     * elsewhere too, to read it) */
    const struct proc_map *image = NULL;
    for (size_t k = bss; k > 0 && !image; k--) {
        const struct proc_map *map = &maps->maps[k - 1];
        if (map->end != maps->maps[k].start || strcmp(map->path, maps->maps[bss - 1].path) != 0)
            break;
        if (map->offset == 0)
            image = map;
    }
    Elf64_Ehdr ehdr;
    if (!image || leakscan_target_read(target, image->start, &ehdr, sizeof ehdr) < 0 ||
        memcmp(ehdr.e_ident, ELFMAG, SELFMAG) != 0 || ehdr.e_phentsize != sizeof(Elf64_Phdr) || ehdr.e_phnum > 64 ||
        ehdr.e_phoff + (uint64_t)ehdr.e_phnum * sizeof(Elf64_Phdr) > image->end - image->start)
        return UINT64_MAX;
    Elf64_Phdr phdrs[64];
    if (leakscan_target_read(target, image->start + ehdr.e_phoff, phdrs, ehdr.e_phnum * sizeof *phdrs) < 0)
        return UINT64_MAX;
    uint64_t bias = UINT64_MAX, end = 0;
    for (size_t k = 0; k < ehdr.e_phnum; k++) {
        if (phdrs[k].p_type != PT_LOAD)
            continue;
        if (phdrs[k].p_offset == 0)
            bias = image->start - phdrs[k].p_vaddr;
        if (phdrs[k].p_vaddr + phdrs[k].p_memsz > end)
            end = phdrs[k].p_vaddr + phdrs[k].p_memsz;
    }
    return bias == UINT64_MAX || end == 0 ? UINT64_MAX : (bias + end + 4095) / 4096 * 4096;
}

/* ---- threads ------------------------------------------------------------- */

struct thread_state {
    uint64_t sp, fs_base;
};

static int read_registers(pid_t tid, struct roots *r, struct thread_state *thread, char *err, size_t err_size)
{
    struct user_regs_struct regs;
    if (ptrace(PTRACE_GETREGS, tid, NULL, &regs) < 0) {
        error_printf(err, err_size,
                  "leak scan: cannot read the registers of thread %d: %s (every thread must be stopped under "
                  "ptrace by the caller)",
                  (int)tid, strerror(errno));
        return -1;
    }
    const uint64_t values[] = {regs.rax, regs.rbx, regs.rcx, regs.rdx, regs.rsi, regs.rdi, regs.rbp, regs.rsp,
                               regs.r8,  regs.r9,  regs.r10, regs.r11, regs.r12, regs.r13, regs.r14, regs.r15,
                               regs.rip};
    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++)
        if (add_word(r, values[i]) < 0)
            return -1;
    thread->sp = regs.rsp;
    thread->fs_base = regs.fs_base;
    return 0;
}

/* ---- the vtable test of memcheck's multipleinheritance heuristic ---------- */

struct vtable_context {
    struct leakscan_target *target;
    const struct proc_maps *maps;
};

static bool is_file_mapping(const struct proc_map *map)
{
    return map && map->path[0] == '/' && !is_profiler_mapping(map->path);
}

static int is_vtable(void *context, uint64_t address)
{
    struct vtable_context *v = context;
    const struct proc_map *map = proc_maps_find(v->maps, address);
    if (!is_file_mapping(map) || !(map->perms & PROC_MAP_READ) || map->end - address < 8)
        return 0;
    uint64_t words[VTABLE_MAX_CHECK + 1];
    size_t n = (map->end - address) / 8 < VTABLE_MAX_CHECK + 1 ? (size_t)((map->end - address) / 8) : VTABLE_MAX_CHECK + 1;
    if (leakscan_target_read(v->target, address, words, n * 8) < 0)
        return 0;
    unsigned functions = 0;
    for (size_t i = 0; i < n; i++) {
        if (words[i] == 0)
            continue;
        const struct proc_map *code = proc_maps_find(v->maps, words[i]);
        if (!is_file_mapping(code) || !(code->perms & PROC_MAP_EXEC))
            return 0;
        if (++functions == 2)
            return 1;
    }
    return 0;
}

static int context_read(void *context, uint64_t address, void *buffer, size_t length)
{
    return leakscan_target_read(((struct vtable_context *)context)->target, address, buffer, length);
}

static int context_holds_data(void *context, uint64_t address, size_t length)
{
    return leakscan_target_holds_data(((struct vtable_context *)context)->target, address, length);
}

static int context_read_ranges(void *context, const struct leakscan_range *ranges, size_t count, void *buffer)
{
    return leakscan_target_read_ranges(((struct vtable_context *)context)->target, ranges, count, buffer);
}

/* ---- assembling the roots ------------------------------------------------ */

struct scan_plan {
    struct proc_maps maps;
    uint64_t *resident; /* per mapping: Rss + Swap bytes (UINT64_MAX: unknown) */
    bool *rooted;       /* per mapping: some part of it is a root range */
    struct roots roots;
    const struct leakscan_block *extents; /* the caller's blocks, sorted by address in place */
    size_t extent_count;
    struct thread_state *threads;
    size_t thread_count;
    /* Every live thread's SP is known (ptrace): a thread stack holding
     * none is the cached stack of a thread that exited. */
    bool threads_complete;
    const struct leakscan_shim_memory *shim; /* NULL: no shim (the caller's: read while planning only) */
    int64_t shim_tls_offset; /* the shim's TLS block, from shim */
    uint64_t shim_tls_size;
    uint32_t python_version;                 /* from shim */
    struct leakscan_range *owned;            /* the shim's allocator ranges, sorted and merged */
    size_t owned_count;
    struct leakscan_range *pieces;           /* one mapping's roots (leakscan_mapping_roots) */
    size_t piece_count, piece_capacity;
    uint64_t *tcbs;                          /* TCBs found in mappings, for the shim's TLS */
    size_t tcb_count, tcb_capacity;
};

/* Lowest SP (minus the red zone) of the threads whose SP is in map, or 0. */
static uint64_t stack_floor(const struct scan_plan *plan, const struct proc_map *map)
{
    uint64_t floor = 0;
    for (size_t t = 0; t < plan->thread_count; t++) {
        uint64_t sp = plan->threads[t].sp;
        if (sp >= map->start && sp < map->end) {
            uint64_t low = sp - RED_ZONE < map->start ? map->start : sp - RED_ZONE;
            if (floor == 0 || low < floor)
                floor = low;
        }
    }
    return floor;
}

/* A thread's TCB near the top of [start, end) (tcbhead_t: tcb and self
 * point at it), or 0. */
static uint64_t find_tcb(uint64_t start, uint64_t end, struct leakscan_target *target)
{
    uint64_t window_start = end - start > TCB_SEARCH ? end - TCB_SEARCH : start;
    size_t n = (size_t)((end - window_start) / 8);
    uint64_t *words = n ? malloc(n * 8) : NULL;
    if (!words || leakscan_target_read(target, window_start, words, n * 8) < 0) {
        free(words);
        return 0;
    }
    uint64_t tcb = 0;
    for (size_t k = n >= 3 ? n - 3 : 0; k > 0 && !tcb; k--) {
        uint64_t at = window_start + 8 * k;
        if (words[k] == at && words[k + 2] == at)
            tcb = at;
    }
    free(words);
    return tcb;
}

/* A thread stack glibc keeps in its cache: anonymous, a guard page below. */
static bool is_thread_stack(const struct proc_maps *maps, size_t i)
{
    const struct proc_map *map = &maps->maps[i];
    return i > 0 && is_anonymous(map->path) && maps->maps[i - 1].end == map->start && maps->maps[i - 1].perms == 0;
}

/* The stack of a thread that exited, kept in glibc's stack cache, with its
 * TCB near the top. memcheck scans it from the thread's last SP, which
 * sits just below its static TLS; its dead frames below hold stale
 * pointers. Where to start scanning: TCB - DEAD_TLS_BELOW. */
static uint64_t dead_thread_floor(const struct proc_map *map, uint64_t tcb)
{
    return tcb - DEAD_TLS_BELOW > map->start ? tcb - DEAD_TLS_BELOW : map->start;
}

static int remember_tcb(struct scan_plan *plan, uint64_t tcb)
{
    if (plan->tcb_count == plan->tcb_capacity) {
        size_t capacity = plan->tcb_capacity ? 2 * plan->tcb_capacity : 16;
        uint64_t *grown = realloc(plan->tcbs, capacity * sizeof *grown);
        if (!grown)
            return -1;
        plan->tcbs = grown;
        plan->tcb_capacity = capacity;
    }
    plan->tcbs[plan->tcb_count++] = tcb;
    return 0;
}

/* Rss + Swap of every mapping, from /proc/PID/smaps: a mapping never
 * touched holds only zeros and is skipped. */
static void read_resident(pid_t pid, const struct proc_maps *maps, uint64_t *resident)
{
    for (size_t i = 0; i < maps->count; i++)
        resident[i] = UINT64_MAX;
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/smaps", (int)pid);
    FILE *smaps = fopen(path, "re");
    if (!smaps)
        return;
    char line[4096];
    size_t current = maps->count;
    while (fgets(line, sizeof line, smaps)) {
        uint64_t start, end, kib;
        if (sscanf(line, "%" SCNx64 "-%" SCNx64 " ", &start, &end) == 2 && strchr(line, ' ')) {
            const struct proc_map *map = proc_maps_find(maps, start);
            current = map && map->start == start ? (size_t)(map - maps->maps) : maps->count;
            if (current < maps->count)
                resident[current] = 0;
        } else if (current < maps->count &&
                   (sscanf(line, "Rss: %" SCNu64 " kB", &kib) == 1 || sscanf(line, "Swap: %" SCNu64 " kB", &kib) == 1)) {
            resident[current] += kib * 1024;
        }
    }
    fclose(smaps);
}

/* Adds the present (or swapped) pages of [start, end) as roots, found in
 * /proc/PID/pagemap (bit 63 present, bit 62 swapped). */
static int add_present_pages(struct roots *r, pid_t pid, uint64_t start, uint64_t end)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/pagemap", (int)pid);
    FILE *pagemap = fopen(path, "re");
    if (!pagemap)
        return add_range(r, start, end);
    uint64_t run_start = 0, entries[512];
    int rc = 0;
    for (uint64_t page = start; page < end && rc == 0;) {
        size_t n = (size_t)((end - page) / 4096 < 512 ? (end - page) / 4096 : 512);
        if (fseeko(pagemap, (off_t)(page / 4096 * 8), SEEK_SET) != 0 || fread(entries, 8, n, pagemap) != n) {
            rc = add_range(r, run_start ? run_start : page, end);
            run_start = 0;
            break;
        }
        for (size_t k = 0; k < n && rc == 0; k++, page += 4096) {
            bool present = entries[k] >> 62;
            if (present && !run_start)
                run_start = page;
            else if (!present && run_start) {
                rc = add_range(r, run_start, page);
                run_start = 0;
            }
        }
    }
    if (run_start && rc == 0)
        rc = add_range(r, run_start, end);
    fclose(pagemap);
    return rc;
}

/* The present pages of [start, end) as roots: by the pagemap, or when the
 * plan runs on a copy, the parts of it the copy holds (it took a large
 * mapping's pieces that held data when the process was stopped). */
static int add_present(struct roots *r, struct leakscan_target *target, uint64_t start, uint64_t end)
{
    if (!target->copy)
        return add_present_pages(r, target->pid, start, end);
    const struct leakscan_copy *copy = target->copy;
    for (size_t k = leakscan_first_range_ending_after(copy->ranges, copy->count, start);
         k < copy->count && copy->ranges[k].start < end; k++) {
        uint64_t from = copy->ranges[k].start > start ? copy->ranges[k].start : start;
        uint64_t to = copy->ranges[k].end < end ? copy->ranges[k].end : end;
        if (add_range(r, from, to) < 0)
            return -1;
    }
    return 0;
}

/* A mapping's roots as leakscan_mapping_roots found them (not the whole
 * mapping): from a thread's lowest SP up, if it is a thread's stack that
 * the kernel merged with the mapping above it; only the present pages of
 * a large mapping. In a hand-over, a TCB in a piece tells where that
 * thread's TLS is (the static TLS of the first thread may share a mapping
 * with an arena or the shim's .bss). */
static int add_pieces(struct scan_plan *plan, const struct proc_map *map, struct leakscan_target *target)
{
    uint64_t floor = stack_floor(plan, map);
    for (size_t k = 0; k < plan->piece_count; k++) {
        const struct leakscan_range *piece = &plan->pieces[k];
        uint64_t start = piece->start > floor ? piece->start : floor, tcb = 0;
        if (start >= piece->end)
            continue;
        if (!plan->threads_complete && is_anonymous(map->path))
            tcb = find_tcb(start, piece->end, target);
        if (tcb && remember_tcb(plan, tcb) < 0)
            return -1;
        int rc = map->end - map->start > SPARSE_MAPPING
                     ? add_present(&plan->roots, target, start, piece->end)
                     : add_range(&plan->roots, start, piece->end);
        if (rc < 0)
            return -1;
    }
    return 0;
}

/* A mapping that is a root whole: a thread's stack from its lowest SP, a
 * cached stack from its TCB, a large mapping over its present pages. */
static int add_whole_mapping(struct scan_plan *plan, size_t i, struct leakscan_target *target)
{
    const struct proc_map *map = &plan->maps.maps[i];
    uint64_t floor = stack_floor(plan, map), tcb = 0;
    if (is_anonymous(map->path) && (!plan->threads_complete || (!floor && is_thread_stack(&plan->maps, i))))
        tcb = find_tcb(map->start, map->end, target);
    if (tcb && remember_tcb(plan, tcb) < 0)
        return -1;
    if (!floor && tcb && plan->threads_complete)
        floor = dead_thread_floor(map, tcb);
    return map->end - map->start > SPARSE_MAPPING && !floor
               ? add_present(&plan->roots, target, map->start, map->end)
               : add_range(&plan->roots, floor ? floor : map->start, map->end);
}

static int add_mapping_roots(struct scan_plan *plan, struct leakscan_target *target)
{
    struct leakscan_memory memory = {
        .read = leakscan_target_read, .holds_data = leakscan_target_holds_data, .context = target};
    for (size_t i = 0; i < plan->maps.count; i++) {
        const struct proc_map *map = &plan->maps.maps[i];
        if (is_never_root(map))
            continue;
        uint64_t size = map->end - map->start, resident = plan->resident[i];
        if (resident == 0 || (is_anonymous(map->path) && size > RESERVATION))
            continue;
        struct leakscan_range range = {map->start, map->end};
        if (is_profiler_bss(&plan->maps, i)) {
            uint64_t image_end = profiler_image_end(&plan->maps, i, target);
            range.start = image_end > map->start ? image_end : map->start;
            if (range.start >= range.end)
                continue;
        }
        plan->piece_count = 0;
        if (leakscan_mapping_roots(&memory, range, plan->extents, plan->extent_count, plan->owned, plan->owned_count,
                                   &plan->pieces, &plan->piece_count, &plan->piece_capacity) < 0)
            return -1;
        plan->rooted[i] = plan->piece_count > 0;
        bool whole = plan->piece_count == 1 && plan->pieces[0].start == map->start && plan->pieces[0].end == map->end;
        if ((whole ? add_whole_mapping(plan, i, target) : add_pieces(plan, map, target)) < 0)
            return -1;
    }
    return 0;
}

/* Leaves [start, end) out of the roots. */
static int exclude_range(struct roots *r, uint64_t start, uint64_t end)
{
    size_t count = r->count;
    for (size_t i = 0; i < count; i++) {
        struct leakscan_range *range = &r->ranges[i];
        if (range->end <= start || range->start >= end)
            continue;
        uint64_t tail_start = end, tail_end = range->end;
        range->end = start > range->start ? start : range->start;
        if (tail_end > tail_start && add_range(r, tail_start, tail_end) < 0)
            return -1;
    }
    return 0;
}

/* A thread's TLS in a mapping that is no root (it holds blocks of an
 * allocator memslope does not know): the window around fs_base, minus the
 * blocks and the allocator ranges. */
static int add_tls_roots(struct scan_plan *plan)
{
    for (size_t t = 0; t < plan->thread_count; t++) {
        uint64_t fs = plan->threads[t].fs_base;
        const struct proc_map *map = proc_maps_find(&plan->maps, fs);
        if (!map || plan->rooted[map - plan->maps.maps] || is_profiler_mapping(map->path) ||
            !(map->perms & PROC_MAP_READ) ||
            block_bytes_in(plan->extents, plan->extent_count, map->start, map->end) == 0)
            continue;
        uint64_t start = fs - map->start > TLS_BELOW_FS ? fs - TLS_BELOW_FS : map->start;
        uint64_t end = map->end - fs > TLS_ABOVE_FS ? fs + TLS_ABOVE_FS : map->end;
        if (add_range_around_blocks(&plan->roots, plan->extents, plan->extent_count, start, end) < 0)
            return -1;
        for (size_t k = leakscan_first_range_ending_after(plan->owned, plan->owned_count, start);
             k < plan->owned_count && plan->owned[k].start < end; k++)
            if (exclude_range(&plan->roots, plan->owned[k].start, plan->owned[k].end) < 0)
                return -1;
    }
    return 0;
}

/* The shim's TLS block in every thread whose thread pointer is known: its
 * fs_base, or a TCB found near the top of a mapping (the threads a
 * hand-over does not name, the stacks of threads that exited). */
static int exclude_shim_tls(struct scan_plan *plan)
{
    int64_t offset = plan->shim_tls_offset;
    uint64_t size = plan->shim_tls_size;
    if (size == 0)
        return 0;
    for (size_t t = 0; t < plan->thread_count + plan->tcb_count; t++) {
        uint64_t pointer = t < plan->thread_count ? plan->threads[t].fs_base : plan->tcbs[t - plan->thread_count];
        uint64_t start = pointer + (uint64_t)offset;
        if (pointer && exclude_range(&plan->roots, start, start + size) < 0)
            return -1;
    }
    return 0;
}

/* The shim's allocator ranges, sorted and merged: the target wrote them
 * (any order; an empty or wrapping one is dropped). */
static int sort_owned(struct scan_plan *plan)
{
    size_t n = plan->shim ? plan->shim->allocator_range_count : 0, kept = 0;
    plan->owned = malloc((n ? n : 1) * sizeof *plan->owned);
    if (!plan->owned)
        return -1;
    for (size_t i = 0; i < n; i++) {
        struct leakscan_range range = plan->shim->allocator_ranges[i];
        if (range.end > range.start)
            plan->owned[kept++] = range;
    }
    if (kept > 1)
        qsort(plan->owned, kept, sizeof *plan->owned, compare_ranges);
    size_t out = 0;
    for (size_t i = 0; i < kept; i++) {
        if (out > 0 && plan->owned[i].start <= plan->owned[out - 1].end) {
            if (plan->owned[i].end > plan->owned[out - 1].end)
                plan->owned[out - 1].end = plan->owned[i].end;
        } else {
            plan->owned[out++] = plan->owned[i];
        }
    }
    plan->owned_count = out;
    return 0;
}

/* At an exit_group the thread-group leader may be past releasing its
 * memory, or release it during the scan, while the thread that called
 * exit_group still has it: the leader is not stopped, since a thread that
 * SIGKILL ends does not stop at its exit. Reads through any thread id see
 * the same memory, so they go through the first of the stopped threads
 * (the caller's list, which cannot let go of the memory while stopped)
 * whose maps list anything, and through pid only if none does. The first
 * run in 40 or so of `exit_paths thread-exit` lost its check to this. */
static int read_maps_of_a_live_thread(struct scan_plan *plan, struct leakscan_target *target, const pid_t *tids,
                                      size_t tid_count)
{
    int rc = -1;
    for (size_t t = 0; t < tid_count && (rc < 0 || plan->maps.count == 0); t++) {
        if (rc == 0)
            proc_maps_free(&plan->maps);
        rc = proc_maps_read(tids[t], &plan->maps);
        if (rc == 0 && plan->maps.count > 0)
            target->pid = tids[t];
    }
    if (rc < 0 || plan->maps.count == 0) {
        if (rc == 0)
            proc_maps_free(&plan->maps);
        rc = proc_maps_read(target->pid, &plan->maps);
    }
    if (rc == 0 && plan->maps.count == 0) {
        errno = ESRCH;
        return -1;
    }
    return rc;
}

/* The roots, from the maps, registers and residence taken: the blocks'
 * extents, the roots from the mappings and TLS, main_arena left out. */
static int plan_roots_from_residence(struct scan_plan *plan, struct leakscan_target *target,
                                     const struct leakscan_block *blocks, size_t block_count, char *err,
                                     size_t err_size)
{
    plan->extents = blocks;
    plan->extent_count = block_count;
    if (add_mapping_roots(plan, target) < 0 || add_tls_roots(plan) < 0)
        goto out_of_memory;
    /* main_arena's bins point at free chunks' headers, which lie inside
     * the previous (possibly leaked) block */
    uint64_t arena = leakscan_find_main_arena(target, &plan->maps);
    if (arena && exclude_range(&plan->roots, arena, arena + LEAKSCAN_MSTATE_SIZE) < 0)
        goto out_of_memory;
    if (exclude_shim_tls(plan) < 0)
        goto out_of_memory;
    return 0;
out_of_memory:
    error_printf(err, err_size, "leak scan: out of memory while listing the roots of process %d", (int)target->pid);
    return -1;
}

/* What the plan reads of the process besides its memory, maps and
 * registers: what the shim says it owns, and what each mapping holds
 * (/proc/PID/smaps). */
static int plan_residence(struct scan_plan *plan, struct leakscan_target *target, char *err, size_t err_size)
{
    plan->resident = malloc((plan->maps.count ? plan->maps.count : 1) * sizeof *plan->resident);
    plan->rooted = calloc(plan->maps.count ? plan->maps.count : 1, sizeof *plan->rooted);
    if (!plan->resident || !plan->rooted || sort_owned(plan) < 0) {
        error_printf(err, err_size, "leak scan: out of memory while listing the roots of process %d",
                     (int)target->pid);
        return -1;
    }
    read_resident(target->pid, &plan->maps, plan->resident);
    if (plan->shim) {
        plan->shim_tls_offset = plan->shim->tls_offset;
        plan->shim_tls_size = plan->shim->tls_size;
        plan->python_version = plan->shim->python_version;
    }
    return 0;
}

/* What every scan needs besides the maps and the threads. */
static int plan_roots(struct scan_plan *plan, struct leakscan_target *target, const struct leakscan_block *blocks,
                      size_t block_count, char *err, size_t err_size)
{
    return plan_residence(plan, target, err, err_size) < 0
               ? -1
               : plan_roots_from_residence(plan, target, blocks, block_count, err, err_size);
}

/* A process stopped under ptrace: maps, and every thread's registers; then
 * the roots, unless blocks is NULL (a snapshot's plan, finished later). */
static int plan_scan(struct scan_plan *plan, struct leakscan_target *target, const pid_t *tids, size_t tid_count,
                     const struct leakscan_block *blocks, size_t block_count, char *err, size_t err_size)
{
    if (read_maps_of_a_live_thread(plan, target, tids, tid_count) < 0) {
        error_printf(err, err_size,
                  errno == ESRCH || errno == ENOENT
                      ? "process %d exited during the leak scan (/proc/%d/maps: %s); nothing was reported"
                      : "leak scan: cannot read /proc/%d/maps of process %d: %s",
                  (int)target->pid, (int)target->pid, strerror(errno));
        return -1;
    }
    plan->threads = calloc(tid_count ? tid_count : 1, sizeof *plan->threads);
    plan->thread_count = tid_count;
    plan->threads_complete = true;
    if (!plan->threads) {
        error_printf(err, err_size, "leak scan: out of memory for the threads of process %d", (int)target->pid);
        return -1;
    }
    for (size_t t = 0; t < tid_count; t++)
        if (read_registers(tids[t], &plan->roots, &plan->threads[t], err, err_size) < 0)
            return -1;
    return blocks ? plan_roots(plan, target, blocks, block_count, err, err_size) : 0;
}

/* A process that handed over its maps, one thread's SP and root words. */
static int plan_handover(struct scan_plan *plan, struct leakscan_target *target,
                         const struct leakscan_handover *handover, const struct leakscan_block *blocks,
                         size_t block_count, char *err, size_t err_size)
{
    if (lseek(handover->maps_fd, 0, SEEK_SET) < 0 || proc_maps_read_fd(handover->maps_fd, &plan->maps) < 0) {
        error_printf(err, err_size,
                  "leak scan: cannot read the maps process %d handed over (its /proc/self/maps): %s",
                  (int)target->pid, strerror(errno));
        return -1;
    }
    if (plan->maps.count == 0) {
        error_printf(err, err_size, "leak scan: the maps process %d handed over list no mapping", (int)target->pid);
        return -1;
    }
    plan->threads = calloc(1, sizeof *plan->threads);
    plan->thread_count = 1;
    plan->threads_complete = false;
    int rc = plan->threads ? 0 : -1;
    for (size_t i = 0; rc == 0 && i < handover->root_word_count; i++)
        rc = add_word(&plan->roots, handover->root_words[i]);
    if (rc < 0) {
        error_printf(err, err_size, "leak scan: out of memory for the threads of process %d", (int)target->pid);
        return -1;
    }
    plan->threads[0].sp = handover->stack_pointer;
    return plan_roots(plan, target, blocks, block_count, err, err_size);
}

static int classify_planned(struct scan_plan *plan, struct leakscan_target *target, struct leakscan_block *blocks,
                            size_t block_count, struct leakscan_totals *totals, struct leakscan_stats *stats,
                            char *err, size_t err_size)
{
    struct vtable_context context = {target, &plan->maps};
    struct leakscan_image image = {
        .memory = {.read = context_read,
                   /* handed over: every range is a pread of its own */
                   .read_ranges = target->handed_over ? NULL : context_read_ranges,
                   .is_vtable = is_vtable,
                   .holds_data = context_holds_data,
                   .context = &context},
        .roots = plan->roots.ranges,
        .root_count = plan->roots.count,
        .root_words = plan->roots.words,
        .root_word_count = plan->roots.word_count,
        .python_version = plan->python_version,
    };
    return leakscan_classify(&image, blocks, block_count, totals, stats, err, err_size);
}

static void free_plan(struct scan_plan *plan)
{
    free(plan->rooted);
    free(plan->owned);
    free(plan->pieces);
    free(plan->tcbs);
    proc_maps_free(&plan->maps);
    free(plan->roots.ranges);
    free(plan->roots.words);
    free(plan->threads);
    free(plan->resident);
}

/* The CPython a process without the shim runs, from the names of its
 * mappings (python3.N, libpython3.N...): PY_VERSION_HEX of 3.N.0, or 0.
 * A free-threaded build (python3.Nt) lays its objects out otherwise: 0. */
static uint32_t python_version_of(const struct proc_maps *maps)
{
    for (size_t i = 0; i < maps->count; i++) {
        const char *name = strrchr(maps->maps[i].path, '/');
        name = name ? name + 1 : maps->maps[i].path;
        if (strncmp(name, "lib", 3) == 0)
            name += 3;
        unsigned minor;
        char after;
        int parsed = sscanf(name, "python3.%u%c", &minor, &after);
        if (parsed >= 1 && minor < 100)
            return parsed == 2 && after == 't' ? 0 : 0x03000000u | minor << 16;
    }
    return 0;
}

static int process_target_shim(struct leakscan_target *target, const pid_t *tids, size_t tid_count,
                               const struct leakscan_shim_memory *shim, struct leakscan_block *blocks,
                               size_t block_count, struct leakscan_totals *totals, struct leakscan_stats *stats,
                               char *err, size_t err_size)
{
    struct scan_plan plan = {.shim = shim};
    leakscan_sort_blocks(blocks, block_count); /* the planning looks blocks up by address */
    int rc = plan_scan(&plan, target, tids, tid_count, blocks, block_count, err, err_size);
    if (rc == 0 && !shim) /* `memslope leaks PID`: no shim to say what runs */
        plan.python_version = python_version_of(&plan.maps);
    if (rc == 0)
        rc = classify_planned(&plan, target, blocks, block_count, totals, stats, err, err_size);
    free_plan(&plan);
    return rc;
}

/* ---- the scan split where the process may run on ----------------------- */

struct leakscan_snapshot {
    struct scan_plan plan;
    bool planned; /* the roots are listed (else finish_plan lists them from the copy) */
    /* the process: after the copy, read only in read-only file mappings
     * (the vtable test, the shim's ELF header) and through the copy */
    struct leakscan_target target;
    struct vtable_context vtable;
    struct leakscan_copy copy;
    struct leakscan_range *copied; /* the mappings the copy holds (what of them held data) */
    size_t copied_count;
    struct leakscan_block *blocks;
    size_t block_count;
    void (*blocks_sorted)(void *); /* the caller sorts them (leakscan_snapshot_take) */
    void *sorted_arg;
};

static const void *snapshot_view(void *context, uint64_t address, size_t length)
{
    return leakscan_copy_view(&((struct leakscan_snapshot *)context)->copy, address, length);
}

static const void *snapshot_view_span(void *context, uint64_t address, uint64_t *start, uint64_t *end)
{
    return leakscan_copy_view_span(&((struct leakscan_snapshot *)context)->copy, address, start, end);
}

static int snapshot_read(void *context, uint64_t address, void *buffer, size_t length)
{
    return leakscan_copy_read(&((struct leakscan_snapshot *)context)->copy, address, buffer, length);
}

static int snapshot_holds_data(void *context, uint64_t address, size_t length)
{
    return leakscan_copy_holds_data(&((struct leakscan_snapshot *)context)->copy, address, length);
}

static int snapshot_is_vtable(void *context, uint64_t address)
{
    return is_vtable(&((struct leakscan_snapshot *)context)->vtable, address);
}

/* The mappings a snapshot copies whole, so that the plan can follow from
 * the copy: every readable and writable mapping that held data, but the
 * profiler's own and devices' (which no scan reads). */
static bool is_copied_mapping(const struct scan_plan *plan, size_t i)
{
    const struct proc_map *map = &plan->maps.maps[i];
    const char *path = map->path;
    if ((map->perms & (PROC_MAP_READ | PROC_MAP_WRITE)) != (PROC_MAP_READ | PROC_MAP_WRITE) || plan->resident[i] == 0)
        return false;
    if (path[0] == '[' && !starts_with(path, "[stack") && !starts_with(path, "[anon:") && strcmp(path, "[heap]") != 0)
        return false;
    if (starts_with(path, "/dev/") && strcmp(path, "/dev/zero") != 0 && !starts_with(path, "/dev/shm/"))
        return false;
    return !is_profiler_mapping(path);
}

/* Whether the plan can follow from a copy of the mappings: no reservation
 * (the scan reads only the blocks in one, which may be anywhere in it). */
static bool plan_can_follow(const struct scan_plan *plan)
{
    for (size_t i = 0; i < plan->maps.count; i++)
        if (is_copied_mapping(plan, i) && is_anonymous(plan->maps.maps[i].path) &&
            plan->maps.maps[i].end - plan->maps.maps[i].start > RESERVATION)
            return false;
    return true;
}

/* The copied mappings, and what to copy of them: a shared mapping whole (a
 * page another process wrote holds data without being in this one's page
 * table), of a private one the 1 MiB pieces whose pages hold data. */
static int list_copied_mappings(struct leakscan_snapshot *s, struct leakscan_range **pieces, size_t *piece_count)
{
    size_t capacity = 0, mapping_capacity = 0;
    for (size_t i = 0; i < s->plan.maps.count; i++) {
        if (!is_copied_mapping(&s->plan, i))
            continue;
        const struct proc_map *map = &s->plan.maps.maps[i];
        if (growable_array_reserve(&s->copied, &mapping_capacity, s->copied_count + 1, sizeof *s->copied) < 0)
            return -1;
        s->copied[s->copied_count++] = (struct leakscan_range){map->start, map->end};
        for (uint64_t at = map->start; at < map->end;) {
            uint64_t stop = map->perms & PROC_MAP_SHARED ? map->end : (at | ((1ull << 20) - 1)) + 1;
            stop = stop < map->end ? stop : map->end;
            if ((map->perms & PROC_MAP_SHARED) || leakscan_target_holds_data(&s->target, at, (size_t)(stop - at))) {
                if (growable_array_reserve(pieces, &capacity, *piece_count + 1, sizeof **pieces) < 0)
                    return -1;
                (*pieces)[(*piece_count)++] = (struct leakscan_range){at, stop};
            }
            at = stop;
        }
    }
    return 0;
}

/* What the process holds now, for a plan that follows from the copy: its
 * maps, registers and residence, and a copy of its readable and writable
 * mappings. 1: over byte_limit (nothing copied). */
static int copy_mappings(struct leakscan_snapshot *s, uint64_t byte_limit, struct leakscan_buffer *spare)
{
    struct leakscan_range *pieces = NULL;
    size_t piece_count = 0;
    if (list_copied_mappings(s, &pieces, &piece_count) < 0) {
        free(pieces);
        return -1;
    }
    struct leakscan_memory source = {.read = context_read,
                                     .read_ranges = context_read_ranges,
                                     .holds_data = context_holds_data,
                                     .context = &s->vtable};
    int rc = leakscan_copy_take(&s->copy, &source, pieces, piece_count, NULL, 0, byte_limit, spare);
    free(pieces);
    return rc;
}

/* The blocks' pages and the roots copied, the plan made, with the process
 * stopped (a process with a reservation). 1: over byte_limit. */
static int copy_planned(struct leakscan_snapshot *s, uint64_t byte_limit, struct leakscan_buffer *spare,
                        char *err, size_t err_size)
{
    if (s->blocks_sorted)
        s->blocks_sorted(s->sorted_arg);
    leakscan_sort_blocks(s->blocks, s->block_count); /* the planning looks blocks up by address */
    if (plan_roots_from_residence(&s->plan, &s->target, s->blocks, s->block_count, err, err_size) < 0)
        return -1;
    struct leakscan_memory source = {.read = context_read,
                                     .read_ranges = context_read_ranges,
                                     .holds_data = context_holds_data,
                                     .context = &s->vtable};
    s->planned = true;
    return leakscan_copy_take(&s->copy, &source, s->plan.roots.ranges, s->plan.roots.count, s->blocks,
                              s->block_count, byte_limit, spare);
}

/* With the process stopped: its maps, registers and residence, then a copy
 * of its mappings (the blocks sorted and the roots planned later, from the
 * copy), or where it cannot be (a reservation), the roots planned and
 * what the scan reads of them and of the blocks copied. 1: over byte_limit,
 * or no memory for the copy. */
static int take_snapshot(struct leakscan_snapshot *s, const pid_t *tids, size_t tid_count, uint64_t byte_limit,
                         struct leakscan_buffer *spare, char *err, size_t err_size)
{
    if (plan_scan(&s->plan, &s->target, tids, tid_count, NULL, 0, err, err_size) < 0 ||
        plan_residence(&s->plan, &s->target, err, err_size) < 0)
        return -1;
    s->vtable = (struct vtable_context){&s->target, &s->plan.maps};
    int rc = plan_can_follow(&s->plan) ? copy_mappings(s, byte_limit, spare)
                                       : copy_planned(s, byte_limit, spare, err, err_size);
    s->plan.shim = NULL; /* the caller's, read while planning only */
    if (rc == 0)
        leakscan_target_hold_memory(&s->target); /* for what is read later: the thread may exit, the image change */
    if (rc == -1)
        rc = 1; /* no memory for the copy (an mmap refused): a scan in place needs far less */
    else if (rc == -2)
        error_printf(err, err_size, "process %d exited during the leak scan; nothing was reported",
                     (int)s->target.pid);
    return rc;
}

/* The plan from the copy: the blocks sorted, the roots found as in the
 * stopped process, its memory read from the copy. */
static int finish_plan(struct leakscan_snapshot *s, char *err, size_t err_size)
{
    if (s->planned)
        return 0;
    s->planned = true;
    leakscan_sort_blocks(s->blocks, s->block_count);
    s->target.copy = &s->copy;
    s->target.copied = s->copied;
    s->target.copied_count = s->copied_count;
    return plan_roots_from_residence(&s->plan, &s->target, s->blocks, s->block_count, err, err_size);
}

int leakscan_snapshot_take(pid_t pid, const pid_t *tids, size_t tid_count, const struct leakscan_shim_memory *shim,
                           struct leakscan_block *blocks, size_t block_count, void (*blocks_sorted)(void *),
                           void *sorted_arg, uint64_t byte_limit, struct leakscan_buffer *spare,
                           struct leakscan_snapshot **snapshot, char *err, size_t err_size)
{
    *snapshot = NULL;
    struct leakscan_snapshot *s = calloc(1, sizeof *s);
    if (!s) {
        error_printf(err, err_size, "leak scan: out of memory for a snapshot of process %d", (int)pid);
        return -1;
    }
    leakscan_target_open(&s->target, pid);
    s->plan.shim = shim;
    s->blocks = blocks;
    s->block_count = block_count;
    s->blocks_sorted = blocks_sorted;
    s->sorted_arg = sorted_arg;
    int rc = take_snapshot(s, tids, tid_count, byte_limit, spare, err, err_size);
    if (rc != 0) {
        leakscan_snapshot_free(s);
        return rc;
    }
    *snapshot = s;
    return 0;
}

uint64_t leakscan_snapshot_bytes(const struct leakscan_snapshot *snapshot)
{
    return snapshot->copy.buffer.size;
}

int leakscan_snapshot_classify(struct leakscan_snapshot *snapshot, struct leakscan_totals *totals,
                               struct leakscan_stats *stats, char *err, size_t err_size)
{
    if (finish_plan(snapshot, err, err_size) < 0)
        return -1;
    struct leakscan_image image = {
        .memory = {.read = snapshot_read,
                   .view = snapshot_view,
                   .view_span = snapshot_view_span,
                   .is_vtable = snapshot_is_vtable,
                   .holds_data = snapshot_holds_data,
                   .context = snapshot},
        .roots = snapshot->plan.roots.ranges,
        .root_count = snapshot->plan.roots.count,
        .root_words = snapshot->plan.roots.words,
        .root_word_count = snapshot->plan.roots.word_count,
        .python_version = snapshot->plan.python_version,
    };
    return leakscan_classify(&image, snapshot->blocks, snapshot->block_count, totals, stats, err, err_size);
}

void leakscan_snapshot_release(struct leakscan_snapshot *snapshot, struct leakscan_buffer *keep)
{
    leakscan_copy_release(&snapshot->copy, keep);
}

void leakscan_snapshot_free(struct leakscan_snapshot *snapshot)
{
    if (!snapshot)
        return;
    leakscan_copy_free(&snapshot->copy);
    free(snapshot->copied);
    free_plan(&snapshot->plan);
    leakscan_target_close(&snapshot->target);
    free(snapshot);
}

int leakscan_process_target(struct leakscan_target *target, const pid_t *tids, size_t tid_count,
                            struct leakscan_block *blocks, size_t block_count, struct leakscan_totals *totals,
                            struct leakscan_stats *stats, char *err, size_t err_size)
{
    return process_target_shim(target, tids, tid_count, NULL, blocks, block_count, totals, stats, err, err_size);
}

int leakscan_process_handover(pid_t pid, const struct leakscan_handover *handover, struct leakscan_block *blocks,
                              size_t block_count, struct leakscan_totals *totals, struct leakscan_stats *stats,
                              char *err, size_t err_size)
{
    struct leakscan_target target;
    leakscan_target_open_fd(&target, pid, handover->mem_fd);
    struct scan_plan plan = {.shim = handover->shim};
    leakscan_sort_blocks(blocks, block_count); /* the planning looks blocks up by address */
    int rc = plan_handover(&plan, &target, handover, blocks, block_count, err, err_size);
    if (rc == 0)
        rc = classify_planned(&plan, &target, blocks, block_count, totals, stats, err, err_size);
    free_plan(&plan);
    leakscan_target_close(&target);
    return rc;
}

int leakscan_process_ex(pid_t pid, const pid_t *tids, size_t tid_count, const struct leakscan_shim_memory *shim,
                        struct leakscan_block *blocks, size_t block_count, struct leakscan_totals *totals,
                        struct leakscan_stats *stats, char *err, size_t err_size)
{
    struct leakscan_target target;
    leakscan_target_open(&target, pid);
    int rc = process_target_shim(&target, tids, tid_count, shim, blocks, block_count, totals, stats, err, err_size);
    leakscan_target_close(&target);
    return rc;
}

int leakscan_process(pid_t pid, const pid_t *tids, size_t tid_count, struct leakscan_block *blocks,
                     size_t block_count, struct leakscan_totals *totals, char *err, size_t err_size)
{
    return leakscan_process_ex(pid, tids, tid_count, NULL, blocks, block_count, totals, NULL, err, err_size);
}
