/*
 * glibc_heap.c - glibc malloc's heap of a stopped process, walked from
 * outside (for `memslope leaks PID`), and main_arena found by its contents.
 *
 * Layout assumed (glibc 2.26+, x86-64; checked on every chunk, never
 * trusted): chunk = prev_size, size|A|M|P, user memory at +16; in-use
 * chunks are those whose next chunk has PREV_INUSE, except chunks in
 * fastbins and tcache bins (their next keeps PREV_INUSE; their links are
 * safe-linked since 2.32: stored = (slot >> 12) ^ next). Non-main arenas
 * live in 64 MiB-aligned heaps starting with heap_info {ar_ptr, prev, size}.
 */
#include "leakscan_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/user.h>

#include "../common/error_buffer.h"
#include "../common/proc_maps.h"

#define PREV_INUSE 1u
#define IS_MMAPPED 2u
#define NON_MAIN_ARENA 4u
#define SIZE_BITS 7u
#define MINSIZE 32u
#define PAGE 4096u
#define TCACHE_BINS 64u
#define TCACHE_CHUNK 0x290u        /* sizeof(tcache_perthread_struct) + header, rounded */
#define TCACHE_TLS_WINDOW 8192u    /* libc's TLS (tcache, thread_arena) sits below fs_base */
#define LIST_LIMIT 10000000u       /* no free list is longer; a loop is corruption */
#define MAX_ARENA_SEARCH (16u << 20)
#define WALK_WINDOW (1u << 20)     /* a heap is read this much at a time */
#define WALK_BACKSPACE 64u         /* a window starts this far before the word that needs it */

static uint64_t word_at(struct leakscan_target *target, uint64_t address)
{
    uint64_t value = 0;
    if (leakscan_target_read(target, address, &value, sizeof value) < 0)
        return 0;
    return value;
}

static bool is_anonymous(const char *path)
{
    return path[0] == '\0' || strncmp(path, "[anon:", 6) == 0;
}

/* ---- main_arena by content ----------------------------------------------- */

/* m: a local copy of malloc_state bytes at address. */
static bool looks_like_arena(struct leakscan_target *target, const uint64_t *m, uint64_t address)
{
    unsigned empty = 0;
    for (unsigned i = 0; i < LEAKSCAN_MSTATE_NBINS; i++) {
        uint64_t self = address + LEAKSCAN_MSTATE_BINS - 16 + 16 * i;
        uint64_t fd = m[(LEAKSCAN_MSTATE_BINS + 16 * i) / 8], bk = m[(LEAKSCAN_MSTATE_BINS + 16 * i) / 8 + 1];
        if (fd == self && bk == self)
            empty++;
        else if (fd == 0 || bk == 0 || (fd & 15) || (bk & 15))
            return false;
    }
    uint32_t mutex = (uint32_t)m[0];
    uint64_t attached = m[LEAKSCAN_MSTATE_ATTACHED / 8], system_mem = m[LEAKSCAN_MSTATE_SYSTEM_MEM / 8];
    if (empty < 8 || mutex > 2 || attached > 1000000 || system_mem % PAGE)
        return false;
    /* The arenas form a ring through next: it must come back here. */
    uint64_t next = m[LEAKSCAN_MSTATE_NEXT / 8];
    for (int hops = 0; hops < 1024 && next; hops++) {
        if (next == address)
            return true;
        next = word_at(target, next + LEAKSCAN_MSTATE_NEXT);
    }
    return false;
}

/* A window of the range at a time, in the order a whole read would be
 * searched: a buffer of the whole mapping was fresh memory at every
 * check, and python3's data mappings (3.8 MB) took 967 page faults and
 * 17 ms of issue 14's driver's first case check. The empty bins looked
 * at are those in [at, at + ARENA_STEP); the buffer reaches a
 * malloc_state further each way, so every state such a bin may belong to
 * is in it whole. */
#define ARENA_STEP (64u << 10)
_Static_assert(LEAKSCAN_MSTATE_BINS + 16 * (LEAKSCAN_MSTATE_NBINS - 1) <= LEAKSCAN_MSTATE_SIZE,
               "a bin lies inside its malloc_state");
_Static_assert(LEAKSCAN_MSTATE_SIZE % 8 == 0, "windows stay word-aligned");

/* A thread's arena lives in its first heap, right after heap_info, whose
 * first word (at the HEAP_MAX-aligned start) points back at it, as
 * glibc's _int_new_arena sets it; main_arena, in libc's .data, has no
 * heap_info. A heap that follows a file's mapping is searched, as that
 * file's .bss might be, and its arena looks like main_arena in every
 * other way. */
static bool is_thread_arena(struct leakscan_target *target, uint64_t arena)
{
    return word_at(target, arena & ~(LEAKSCAN_HEAP_MAX - 1)) == arena;
}

/* The first arena, by the empty bin that shows it, among the bins in
 * [at, bins_end): words holds [low, high) of the range [start, end). */
static uint64_t search_window(struct leakscan_target *target, const uint64_t *words, uint64_t low, uint64_t high,
                              uint64_t at, uint64_t bins_end, uint64_t start, uint64_t end)
{
    for (uint64_t bin = at; bin < bins_end && bin + 8 < high; bin += 8) {
        const uint64_t *word = &words[(bin - low) / 8];
        if (word[0] != bin - 16 || word[1] != bin - 16)
            continue; /* not an empty bin */
        for (unsigned k = 0; k < LEAKSCAN_MSTATE_NBINS; k++) {
            uint64_t offset = LEAKSCAN_MSTATE_BINS + 16 * k;
            if (bin - start < offset || bin - offset + LEAKSCAN_MSTATE_SIZE > end)
                continue;
            uint64_t base = bin - offset;
            if (looks_like_arena(target, &words[(base - low) / 8], base) && !is_thread_arena(target, base))
                return base;
        }
    }
    return 0;
}

static uint64_t search_range(struct leakscan_target *target, uint64_t start, uint64_t end)
{
    uint64_t *words = malloc(ARENA_STEP + 2 * LEAKSCAN_MSTATE_SIZE);
    uint64_t found = 0;
    for (uint64_t at = start; words && at < end && !found; at += ARENA_STEP) {
        uint64_t low = at - start > LEAKSCAN_MSTATE_SIZE ? at - LEAKSCAN_MSTATE_SIZE : start;
        uint64_t high = end - at > ARENA_STEP + LEAKSCAN_MSTATE_SIZE ? at + ARENA_STEP + LEAKSCAN_MSTATE_SIZE : end;
        if (leakscan_target_read(target, low, words, (size_t)(high - low)) < 0)
            break;
        uint64_t bins_end = end - at > ARENA_STEP ? at + ARENA_STEP : end;
        found = search_window(target, words, low, high, at, bins_end, start, end);
    }
    free(words);
    return found;
}

/* A mapping of a file, which may be a program's or library's image: not
 * a memfd (memslope's shared region is one), whatever its name, so the
 * anonymous memory the kernel puts after one is no image's .bss. */
static bool is_file_image(const char *path)
{
    return path[0] == '/' && strncmp(path, "/memfd:", 7) != 0;
}

uint64_t leakscan_find_main_arena(struct leakscan_target *target, const struct proc_maps *maps)
{
    for (size_t i = 0; i < maps->count; i++) {
        const struct proc_map *map = &maps->maps[i];
        bool file_data = is_file_image(map->path);
        bool bss_tail = i > 0 && is_anonymous(map->path) && maps->maps[i - 1].end == map->start &&
                        is_file_image(maps->maps[i - 1].path);
        if ((map->perms & (PROC_MAP_READ | PROC_MAP_WRITE)) != (PROC_MAP_READ | PROC_MAP_WRITE) ||
            !(file_data || bss_tail) || map->end - map->start > MAX_ARENA_SEARCH)
            continue;
        uint64_t found = search_range(target, map->start, map->end);
        if (found)
            return found;
    }
    return 0;
}

/* ---- collecting chunks --------------------------------------------------- */

struct walk {
    struct leakscan_target *target;
    struct proc_maps maps;
    struct leakscan_block *blocks;
    size_t count, capacity;
    uint64_t *free_mems; /* user addresses of free chunks that look in use */
    size_t free_count, free_capacity;
    uint64_t *arenas;    /* malloc_state addresses */
    size_t arena_count;
    uint8_t *window;     /* WALK_WINDOW bytes for heap_reader */
    char *err;
    size_t err_size;
};

static int push_block(struct walk *w, uint64_t mem, uint64_t usable)
{
    if (w->count == w->capacity) {
        size_t capacity = w->capacity ? 2 * w->capacity : 1024;
        struct leakscan_block *grown = realloc(w->blocks, capacity * sizeof *grown);
        if (!grown)
            return -1;
        w->blocks = grown;
        w->capacity = capacity;
    }
    w->blocks[w->count++] = (struct leakscan_block){.address = mem, .size = usable};
    return 0;
}

static int push_free(struct walk *w, uint64_t mem)
{
    if (w->free_count == w->free_capacity) {
        size_t capacity = w->free_capacity ? 2 * w->free_capacity : 1024;
        uint64_t *grown = realloc(w->free_mems, capacity * sizeof *grown);
        if (!grown)
            return -1;
        w->free_mems = grown;
        w->free_capacity = capacity;
    }
    w->free_mems[w->free_count++] = mem;
    return 0;
}

/* The file name of a mapping whose file name starts with prefix, or NULL. */
static const char *mapped_file(const struct proc_maps *maps, const char *prefix)
{
    for (size_t i = 0; i < maps->count; i++) {
        const char *name = strrchr(maps->maps[i].path, '/');
        if (name && strncmp(name + 1, prefix, strlen(prefix)) == 0)
            return name + 1;
    }
    return NULL;
}

/* The allocator library mapped into the process, other than glibc's
 * malloc, or NULL. */
static const char *other_allocator(const struct proc_maps *maps)
{
    static const char *const known[] = {"libtcmalloc", "libjemalloc", "libmimalloc", "libhoard", "libtbbmalloc"};
    const char *name = NULL;
    for (size_t k = 0; !name && k < sizeof known / sizeof known[0]; k++)
        name = mapped_file(maps, known[k]);
    return name;
}

/* Why a heap may not be glibc's, said where the walk refuses it. */
static void refusal_hint(const struct walk *w, char *hint, size_t size)
{
    const char *allocator = other_allocator(&w->maps);
    if (allocator)
        snprintf(hint, size, "the process has %s mapped: memslope leaks reads glibc's malloc heap only; record "
                             "the program with memslope record, which sees every allocator's blocks", allocator);
    else if (mapped_file(&w->maps, "ld-musl") || mapped_file(&w->maps, "libc.musl"))
        snprintf(hint, size, "the process runs on musl's libc: memslope leaks reads glibc's malloc heap only; "
                             "record the program with memslope record");
    else if (!mapped_file(&w->maps, "libc.so") && !mapped_file(&w->maps, "libc-"))
        snprintf(hint, size, "no libc.so is mapped: a statically linked program, whose heap memslope leaks does not "
                             "read; memslope record cannot preload its shim into it either");
    else
        snprintf(hint, size, "the process may use another allocator, or a thread may be inside malloc: try again");
}

static int refuse(struct walk *w, const char *what, uint64_t chunk, uint64_t size)
{
    if (w->target->gone) {
        error_printf(w->err, w->err_size, "process %d exited during the leak scan; nothing was reported",
                  (int)w->target->pid);
        return -1;
    }
    char hint[256];
    refusal_hint(w, hint, sizeof hint);
    error_printf(w->err, w->err_size,
              "the glibc heap of process %d does not validate: chunk at 0x%" PRIx64 " (size field 0x%" PRIx64
              ") %s; refusing to guess (%s)",
              (int)w->target->pid, chunk, size, what, hint);
    return -1;
}

/* A heap read front to back a window at a time: the walk reads every
 * chunk header, and a copy of the whole heap would cost as much memory as
 * the heap. */
struct heap_reader {
    struct leakscan_target *target;
    uint64_t start, end;   /* the heap */
    uint64_t window_start; /* the window holds [window_start, window_end) */
    uint64_t window_end;
    uint8_t *window;       /* WALK_WINDOW bytes */
};

/* The word at address (inside the heap), or -1 when it cannot be read.
 * A window starts a little before the word that needed it: the walk
 * reads a chunk's prev_size after the size field that brought it in. */
static int heap_word(struct heap_reader *r, uint64_t address, uint64_t *value)
{
    if (address < r->window_start || address + 8 > r->window_end) {
        uint64_t from = address - r->start > WALK_BACKSPACE ? address - WALK_BACKSPACE : r->start;
        uint64_t to = r->end - from > WALK_WINDOW ? from + WALK_WINDOW : r->end;
        if (address + 8 > to || leakscan_target_read(r->target, from, r->window, (size_t)(to - from)) < 0)
            return -1;
        r->window_start = from;
        r->window_end = to;
    }
    memcpy(value, r->window + (address - r->window_start), 8);
    return 0;
}

/* Walks the chunks of [first, end) up to top (or a fencepost), pushing
 * in-use ones. non_main: chunks of a non-main arena. */
static int walk_chunks(struct walk *w, uint64_t first, uint64_t end, uint64_t top, bool non_main)
{
    struct heap_reader r = {w->target, first, end, 0, 0, w->window};
#define WORD(address) (heap_word(&r, (address), &word) == 0 ? word : (gone = true, 0))
    uint64_t p = first, prev_size = 0, word = 0, next_field = 0;
    bool first_chunk = true, gone = false;
    while (p != top) {
        if (p + 16 > end)
            return refuse(w, "runs past the end of its heap", p, 0);
        /* a chunk's size field was read as the field after the chunk before */
        uint64_t field = first_chunk ? WORD(p + 8) : next_field, size = field & ~(uint64_t)SIZE_BITS;
        if (gone)
            return refuse(w, "is in a heap that could not be read", p, 0);
        if (non_main && size == 16 && (field & PREV_INUSE) && p + 32 <= end && (WORD(p + 24) & ~7ull) == 0)
            return 0; /* fencepost at the end of an old heap */
        if (size < MINSIZE || size % 16 || (field & IS_MMAPPED) || size > end - p)
            return refuse(w, "has an impossible size", p, field);
        if (!non_main && (field & NON_MAIN_ARENA))
            return refuse(w, "claims a non-main arena inside the main heap", p, field);
        if (!(field & PREV_INUSE) && (first_chunk || WORD(p) != prev_size))
            return refuse(w, "says its predecessor is free but prev_size disagrees", p, field);
        uint64_t next = p + size;
        if (top == 0 && next == end)
            return 0; /* the last chunk (top) of a heap whose arena is unknown */
        if (next + 16 > end)
            return refuse(w, "is followed by no chunk header", p, field);
        next_field = WORD(next + 8);
        if ((next_field & PREV_INUSE) && push_block(w, p + 16, size - 8) < 0)
            return -1;
        if (gone)
            return refuse(w, "is in a heap that could not be read", p, 0);
        prev_size = size;
        first_chunk = false;
        p = next;
    }
    uint64_t top_size = WORD(top + 8) & ~(uint64_t)SIZE_BITS;
#undef WORD
    if (gone || top_size % 16 || top_size > end - top)
        return refuse(w, "(the top chunk) has an impossible size", top, top_size);
    return 0;
}

/* Free chunks on a fastbin list: PREV_INUSE stays set in the next chunk. */
static int collect_fastbins(struct walk *w, uint64_t arena)
{
    for (unsigned i = 0; i < LEAKSCAN_MSTATE_NFASTBINS; i++) {
        uint64_t p = word_at(w->target, arena + LEAKSCAN_MSTATE_FASTBINS + 8 * i);
        for (unsigned n = 0; p && n < LIST_LIMIT; n++) {
            if (p & 15)
                return refuse(w, "is on a fastbin list but misaligned", p, 0);
            if (push_free(w, p + 16) < 0)
                return -1;
            p = ((p + 16) >> 12) ^ word_at(w->target, p + 16);
        }
    }
    return 0;
}

/* ---- the main heap, arena heaps, mmapped chunks -------------------------- */

static int walk_main_heap(struct walk *w, uint64_t main_arena)
{
    for (size_t i = 0; i < w->maps.count; i++) {
        const struct proc_map *map = &w->maps.maps[i];
        if (strcmp(map->path, "[heap]") != 0)
            continue;
        uint64_t top = main_arena ? word_at(w->target, main_arena + LEAKSCAN_MSTATE_TOP) : 0;
        if (top && (top < map->start || top >= map->end))
            top = 0; /* the main arena is not contiguous: walk to the end */
        uint64_t first = (map->start + 15) & ~15ull;
        if (walk_chunks(w, first, map->end, top, false) < 0)
            return -1;
    }
    return 0;
}

static bool is_arena_heap_start(struct walk *w, const struct proc_map *map)
{
    if (!is_anonymous(map->path) || map->start % LEAKSCAN_HEAP_MAX || !(map->perms & PROC_MAP_WRITE))
        return false;
    uint64_t ar_ptr = word_at(w->target, map->start), size = word_at(w->target, map->start + 16);
    return ar_ptr && ar_ptr % LEAKSCAN_HEAP_MAX < PAGE && size >= PAGE && size <= LEAKSCAN_HEAP_MAX &&
           size <= map->end - map->start + PAGE;
}

static int note_arena(struct walk *w, uint64_t arena)
{
    for (size_t i = 0; i < w->arena_count; i++)
        if (w->arenas[i] == arena)
            return 0;
    uint64_t *grown = realloc(w->arenas, (w->arena_count + 1) * sizeof *grown);
    if (!grown)
        return -1;
    w->arenas = grown;
    w->arenas[w->arena_count++] = arena;
    return collect_fastbins(w, arena);
}

/* One 64 MiB heap of a non-main arena. The first chunk follows heap_info
 * (and malloc_state in the arena's first heap), 16-aligned; the candidate
 * whose walk validates is the one. */
static int walk_arena_heap(struct walk *w, const struct proc_map *map)
{
    uint64_t h = map->start, ar_ptr = word_at(w->target, h), size = word_at(w->target, h + 16);
    uint64_t end = h + size < map->end ? h + size : map->end;
    uint64_t top = word_at(w->target, ar_ptr + LEAKSCAN_MSTATE_TOP);
    if (top < h || top >= end)
        top = 0; /* an older heap of the arena: it ends with a fencepost */
    uint64_t base = (ar_ptr >= h && ar_ptr < h + PAGE) ? ar_ptr + LEAKSCAN_MSTATE_SIZE : h + 32;
    size_t saved = w->count;
    for (uint64_t first = (base + 15) & ~15ull; first <= ((base + 15) & ~15ull) + 32; first += 16) {
        w->count = saved;
        char *err = w->err;
        w->err = NULL; /* a wrong candidate is not an error yet */
        int rc = walk_chunks(w, first, end, top, true);
        w->err = err;
        if (rc == 0)
            return note_arena(w, ar_ptr);
    }
    w->count = saved;
    return refuse(w, "(the first of an arena heap) is not where heap_info says", h, size);
}

/* An anonymous mapping starting with mmapped chunks (prev_size 0,
 * IS_MMAPPED, page-multiple size), possibly several merged into one. */
static int walk_mmapped(struct walk *w, const struct proc_map *map, size_t *mmapped)
{
    uint64_t p = map->start;
    while (p + 16 <= map->end) {
        uint64_t prev_size = word_at(w->target, p), field = word_at(w->target, p + 8);
        uint64_t size = field & ~(uint64_t)SIZE_BITS;
        if (prev_size != 0 || (field & SIZE_BITS) != IS_MMAPPED || size < PAGE || size % PAGE ||
            size > map->end - p)
            return 0;
        if (push_block(w, p + 16, size - 16) < 0)
            return -1;
        (*mmapped)++;
        p += size;
    }
    return 0;
}

static int walk_other_mappings(struct walk *w, size_t *mmapped)
{
    for (size_t i = 0; i < w->maps.count; i++) {
        const struct proc_map *map = &w->maps.maps[i];
        if ((map->perms & (PROC_MAP_READ | PROC_MAP_WRITE)) != (PROC_MAP_READ | PROC_MAP_WRITE) ||
            !is_anonymous(map->path))
            continue;
        int rc = is_arena_heap_start(w, map) ? walk_arena_heap(w, map) : walk_mmapped(w, map, mmapped);
        if (rc < 0)
            return -1;
    }
    return 0;
}

/* ---- tcache -------------------------------------------------------------- */

static bool is_block_start(const struct walk *w, uint64_t mem);

/* A chunk that is a thread's tcache_perthread_struct: counts[64] (u16)
 * then entries[64]; each list is as long as its count, of chunks of its
 * bin's size. Pushes the listed chunks as free. */
static bool collect_tcache(struct walk *w, uint64_t mem)
{
    uint16_t counts[TCACHE_BINS];
    uint64_t entries[TCACHE_BINS];
    if (leakscan_target_read(w->target, mem, counts, sizeof counts) < 0 ||
        leakscan_target_read(w->target, mem + sizeof counts, entries, sizeof entries) < 0)
        return false;
    size_t saved = w->free_count;
    for (unsigned i = 0; i < TCACHE_BINS; i++) {
        uint64_t e = entries[i];
        unsigned n = 0;
        for (; e && n <= counts[i]; n++) {
            uint64_t size = word_at(w->target, e - 8) & ~(uint64_t)SIZE_BITS;
            if ((e & 15) || size != MINSIZE + 16u * i || !is_block_start(w, e) || push_free(w, e) < 0) {
                w->free_count = saved;
                return false;
            }
            e = (e >> 12) ^ word_at(w->target, e);
        }
        if (n != counts[i] || e) {
            w->free_count = saved;
            return false;
        }
    }
    return push_free(w, mem) == 0; /* the structure itself is no user block */
}

static int compare_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static int compare_blocks(const void *a, const void *b)
{
    return compare_u64(&((const struct leakscan_block *)a)->address, &((const struct leakscan_block *)b)->address);
}

/* The walk finds the blocks in address order within each heap. */
static void sort_blocks(struct walk *w)
{
    for (size_t i = 1; i < w->count; i++) {
        if (w->blocks[i - 1].address > w->blocks[i].address) {
            qsort(w->blocks, w->count, sizeof *w->blocks, compare_blocks);
            return;
        }
    }
}

static bool is_block_start(const struct walk *w, uint64_t mem)
{
    struct leakscan_block key = {.address = mem};
    return bsearch(&key, w->blocks, w->count, sizeof key, compare_blocks) != NULL;
}

/* Each thread's tcache pointer is a word of libc's TLS, just below
 * fs_base, holding the user address of a 0x290 chunk that validates. */
static int collect_tcaches(struct walk *w, const pid_t *tids, size_t tid_count)
{
    sort_blocks(w);
    for (size_t t = 0; t < tid_count; t++) {
        struct user_regs_struct regs;
        if (ptrace(PTRACE_GETREGS, tids[t], NULL, &regs) < 0 || regs.fs_base < TCACHE_TLS_WINDOW)
            continue;
        uint64_t window[TCACHE_TLS_WINDOW / 8];
        if (leakscan_target_read(w->target, regs.fs_base - TCACHE_TLS_WINDOW, window, sizeof window) < 0)
            continue;
        /* The window may reach into another thread's TLS: every tcache
         * structure found there is a real one too, so all are taken. */
        for (size_t k = 0; k < TCACHE_TLS_WINDOW / 8; k++) {
            uint64_t mem = window[k];
            if ((mem & 15) || !is_block_start(w, mem) ||
                (word_at(w->target, mem - 8) & ~(uint64_t)SIZE_BITS) != TCACHE_CHUNK)
                continue;
            collect_tcache(w, mem);
        }
    }
    return 0;
}

/* Drops the blocks that are free chunks (fastbins, tcache) or tcache
 * structures. Both lists sorted. */
static void drop_free_blocks(struct walk *w)
{
    qsort(w->free_mems, w->free_count, sizeof *w->free_mems, compare_u64);
    size_t out = 0, f = 0;
    for (size_t i = 0; i < w->count; i++) {
        while (f < w->free_count && w->free_mems[f] < w->blocks[i].address)
            f++;
        if (f < w->free_count && w->free_mems[f] == w->blocks[i].address)
            continue;
        w->blocks[out++] = w->blocks[i];
    }
    w->count = out;
}

static int check_arena_unlocked(struct walk *w, uint64_t arena)
{
    uint32_t mutex = (uint32_t)word_at(w->target, arena);
    if (mutex == 0)
        return 0;
    error_printf(w->err, w->err_size,
              "process %d was stopped while a thread held the malloc lock of arena 0x%" PRIx64
              "; its heap may be half-updated, so it is not walked: try again",
              (int)w->target->pid, arena);
    return -1;
}

int leakscan_walk_glibc_heap(struct leakscan_target *target, const pid_t *tids, size_t tid_count,
                             struct leakscan_heap *heap, char *err, size_t err_size)
{
    memset(heap, 0, sizeof *heap);
    pid_t pid = target->pid;
    struct walk w = {.target = target, .err = err, .err_size = err_size, .window = malloc(WALK_WINDOW)};
    int rc = -1;
    if (!w.window)
        goto out;
    if (proc_maps_read(pid, &w.maps) < 0) {
        error_printf(err, err_size, "cannot read /proc/%d/maps: %s", (int)pid, strerror(errno));
        goto out;
    }
    uint64_t main_arena = leakscan_find_main_arena(target, &w.maps);
    size_t mmapped = 0;
    if (main_arena && (check_arena_unlocked(&w, main_arena) < 0 || note_arena(&w, main_arena) < 0))
        goto out;
    if (walk_main_heap(&w, main_arena) < 0 || walk_other_mappings(&w, &mmapped) < 0)
        goto out;
    for (size_t i = 0; i < w.arena_count; i++)
        if (check_arena_unlocked(&w, w.arenas[i]) < 0)
            goto out;
    if (!main_arena && w.count == 0) {
        const char *allocator = other_allocator(&w.maps);
        if (allocator)
            error_printf(err, err_size,
                         "no glibc malloc heap found in process %d: it has %s mapped, and memslope leaks reads "
                         "glibc's heap only; record the program with memslope record, which sees every allocator's "
                         "blocks",
                         (int)pid, allocator);
        else
            error_printf(err, err_size,
                         "no glibc malloc heap found in process %d (it uses another allocator, is statically linked "
                         "with a libc memslope does not know, or never called malloc)",
                         (int)pid);
        goto out;
    }
    collect_tcaches(&w, tids, tid_count);
    drop_free_blocks(&w);
    heap->blocks = w.blocks;
    heap->block_count = w.count;
    heap->main_arena = main_arena;
    heap->arena_count = w.arena_count;
    heap->mmapped_count = mmapped;
    w.blocks = NULL;
    rc = 0;
out:
    if (rc < 0 && err && err_size && !err[0])
        error_printf(err, err_size, "out of memory while walking the heap of process %d", (int)pid);
    free(w.blocks);
    free(w.free_mems);
    free(w.arenas);
    free(w.window);
    proc_maps_free(&w.maps);
    return rc;
}

void leakscan_heap_free(struct leakscan_heap *heap)
{
    free(heap->blocks);
    heap->blocks = NULL;
    heap->block_count = 0;
}
