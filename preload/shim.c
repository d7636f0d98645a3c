/*
 * shim.c - libmemslope.so: the allocator interposers and the marker API.
 *
 * Every allocator entry point is exported here with default visibility (the
 * rest of the library is hidden) and forwards to the next definition found by
 * dlsym(RTLD_NEXT). When the process is traced (MEMSLOPE_TRACER_PID is set)
 * each successful allocation and each free of a non-NULL pointer is written,
 * as one event, into the calling thread's ring in the shared region; an
 * allocation carries the id of its deduplicated backtrace.
 *
 * What is counted follows valgrind memcheck's "total heap usage" line:
 * free(NULL) is nothing; realloc is a free of the old block (if any) plus an
 * allocation of the new one; realloc(p, 0), which glibc turns into free(p)
 * returning NULL, is one free; malloc(0) is an allocation of 0 bytes; a
 * failed allocation is nothing. (memcheck 3.19 does not intercept pvalloc at
 * all; the shim records it like memalign, which is what the program did.)
 *
 * Allocations the shim itself causes (dlsym, the unwinder, pthread_atfork,
 * ...) are made while the thread's guard is up and go to the real allocator
 * unrecorded: memcheck would not see them either. Before the real functions
 * are known, dlsym's own calloc is served from a static bootstrap arena whose
 * blocks never reach the real free.
 *
 * Nothing is ever torn down: the region stays mapped and the fd open until
 * the process image ends, so the last free in the last destructor is still
 * recorded.
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <elf.h>
#include <errno.h>
#include <link.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define UNW_LOCAL_ONLY
#include <libunwind.h>

#include "capture_cache.h"
#include "elf_lookup.h"
#include "exit_check.h"
#include "fast_unwind.h"
#include "freeres.h"
#include "held_set.h"
#include "owner_lock.h"
#include "python_runtime.h"
#include "ring_writer.h"
#include "../common/shm_layout.h"
#include "read_set.h"
#include "shm_region.h"
#include "stack_table.h"
#include "thread_memory.h"

#define SHIM_EXPORT __attribute__((visibility("default")))
#define LIKELY(x) __builtin_expect(!!(x), 1)
#define UNLIKELY(x) __builtin_expect(!!(x), 0)

/* ---- the real allocator ------------------------------------------------ */

struct real_allocator {
    void *(*malloc)(size_t);
    void (*free)(void *);
    void *(*calloc)(size_t, size_t);
    void *(*realloc)(void *, size_t);
    int (*posix_memalign)(void **, size_t, size_t);
    void *(*aligned_alloc)(size_t, size_t);
    void *(*memalign)(size_t, size_t);
    void *(*valloc)(size_t);
    void *(*pvalloc)(size_t);
};

static struct real_allocator real;
static int real_resolved; /* 1 (release) once every member of `real` is set */

/* ---- per-thread state -------------------------------------------------- */

/* Direct-mapped (hash, depth) -> id cache in front of the shared table: a
 * hot allocation site costs a hash and one thread-private load instead of a
 * probe of the shared index and a comparison of the entry's frames. A 64-bit hash plus depth is trusted here (the
 * shared table compares frames); a false hit needs a 64-bit collision. */
#define STACK_CACHE_ENTRIES 256u

struct stack_cache_entry {
    uint64_t hash; /* 0 = empty; written last, see remember_stack */
    uint32_t depth;
    uint32_t id;
};

/* What a thread's captures keep between them: the head of its ring slot's
 * part of the image's thread memory (thread_memory.h; the Python caches,
 * python_thread_caches_size() bytes, follow at thread_memory_python). Not
 * in static TLS: glibc takes that from every thread's stack
 * (fixtures/small_stack.c). */
struct capture_memory {
    struct stack_cache_entry stack_cache[STACK_CACHE_ENTRIES];
    struct fast_unwind_memo unwind_memo; /* the previous backtrace (outermost captures only) */
};

struct shim_thread {
    struct ring_producer producer;
    uint32_t guard;      /* > 0 while the shim's own code may allocate: pass through */
    uint32_t capturing;  /* stack captures in progress (signal nesting) */
    uint8_t resolving;   /* inside dlsym: serve from the bootstrap arena */
    uint8_t no_slot;     /* no free slot was found: this thread is not recorded */
    uint8_t sample_primed;
    uint64_t bytes_until_sample;
    uint64_t rng;
    /* From its slot's part of the thread memory (NULL: none; bind_thread_part) */
    struct capture_memory *kept;    /* what its captures keep between them */
    struct capture_cache *captures; /* backtraces with Python frames (outermost captures only;
                                       slot_captures once emptied at its first use: thread_captures) */
    struct capture_cache *slot_captures; /* the slot's capture cache (NULL: none) */
    struct stack_tail stack_tail;   /* outer frames its next new stack may share (outermost captures only) */
    struct held_set held;                /* unsampled blocks it holds back (held_set.h) */
    uint64_t last_stamp;                 /* see event_stamp */
    uint32_t stamps_to_reuse;
    sigset_t guard_saved_mask;           /* the signal mask to restore when the guard drops to 0 */
};

static __thread struct shim_thread this_thread __attribute__((tls_model("initial-exec")));

/* Capture caches (400 KiB of address space each) only for the slots below
 * this, after the parts: all 1,024 took 434 MiB of every recorded
 * process's address space (less for a program under `ulimit -v`); a
 * thread of a higher slot captures Python frames without one. */
#define CAPTURE_CACHE_SLOTS 64u

/* ---- process-wide recording state --------------------------------------- */

enum record_state { RECORD_UNDECIDED = 0, RECORD_INITIALISING, RECORD_ON, RECORD_OFF };

static int record_state;
static void *region;        /* the shared region of this process image */
static int region_fd = -1;  /* kept open: the tracer finds the region through it */
/* The image's thread memory (NULL: none could be had) and its layout: a
 * part of thread_part_bytes a slot, the Python caches at
 * thread_memory_python in each, then CAPTURE_CACHE_SLOTS capture caches
 * of capture_cache_bytes. Made with the region. */
static void *thread_memory;
static size_t thread_memory_bytes, thread_part_bytes, thread_memory_python, capture_cache_bytes;
static pid_t tracer_pid;
static uint32_t max_frames = SHM_DEFAULT_MAX_FRAMES;
static uint64_t sample_rate;
static uintptr_t shim_text_start, shim_text_end;
static bool clock_is_tsc; /* events are stamped with the TSC (decided once, at start) */
static bool hold_enabled; /* --sample-rate under ptrace: threads may hold unsampled blocks (held_set.h) */
static bool hold_always;  /* whatever the tracer's hold_wanted says (MEMSLOPE_HOLD=always: tests) */
static pthread_key_t thread_exit_key;
/* The shim's static TLS block, as an offset from the thread pointer (the
 * same in every thread); size 0 until the constructor found it. */
static int64_t own_tls_offset;
static uint64_t own_tls_size;

/* ---- bootstrap arena: dlsym's allocations before `real` is known -------- */

#define BOOTSTRAP_ARENA_BYTES (64u * 1024u)
#define BOOTSTRAP_HEADER 16u /* holds the block's size, for realloc */

static _Alignas(64) char bootstrap_arena[BOOTSTRAP_ARENA_BYTES];
static size_t bootstrap_used;

static bool is_bootstrap(const void *pointer)
{
    return (const char *)pointer >= bootstrap_arena &&
           (const char *)pointer < bootstrap_arena + BOOTSTRAP_ARENA_BYTES;
}

static void *bootstrap_alloc(size_t size, size_t alignment)
{
    if (alignment < BOOTSTRAP_HEADER)
        alignment = BOOTSTRAP_HEADER;
    if (size > BOOTSTRAP_ARENA_BYTES || (alignment & (alignment - 1)) || alignment > 4096) {
        errno = ENOMEM;
        return NULL;
    }
    size_t old_used = __atomic_load_n(&bootstrap_used, __ATOMIC_RELAXED);
    for (;;) {
        size_t start = (old_used + BOOTSTRAP_HEADER + alignment - 1) & ~(alignment - 1);
        size_t new_used = start + ((size + 15u) & ~(size_t)15u);
        if (new_used > BOOTSTRAP_ARENA_BYTES) {
            errno = ENOMEM;
            return NULL;
        }
        if (__atomic_compare_exchange_n(&bootstrap_used, &old_used, new_used, 0, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED)) {
            /* never reused, so still zero: calloc needs no memset */
            *(size_t *)(bootstrap_arena + start - BOOTSTRAP_HEADER) = size;
            return bootstrap_arena + start;
        }
    }
}

static size_t bootstrap_size(const void *pointer)
{
    return *(const size_t *)((const char *)pointer - BOOTSTRAP_HEADER);
}

/* ---- resolving the real allocator --------------------------------------- */

/* A failed dlsym leaves its message in a block glibc allocates for the
 * thread and frees at the thread's next dl call: allocated by the shim
 * under its guard (unrecorded), it would be freed by the program (a free of
 * a block nobody saw, which memcheck never counts). Called under the guard
 * after the shim's lookups that may fail: the first dlerror takes the
 * message, the second frees it. */
static void discard_dl_error(void)
{
    (void)dlerror();
    (void)dlerror();
}

static void *next_symbol(const char *name)
{
    return dlsym(RTLD_NEXT, name);
}

static void resolve_real(void)
{
    struct shim_thread *thread = &this_thread;
    int saved_errno = errno;
    thread->resolving = 1;
    struct real_allocator found;
    /* POSIX allows converting dlsym's void * to a function pointer. */
    *(void **)&found.malloc = next_symbol("malloc");
    *(void **)&found.free = next_symbol("free");
    *(void **)&found.calloc = next_symbol("calloc");
    *(void **)&found.realloc = next_symbol("realloc");
    *(void **)&found.posix_memalign = next_symbol("posix_memalign");
    *(void **)&found.aligned_alloc = next_symbol("aligned_alloc");
    *(void **)&found.memalign = next_symbol("memalign");
    *(void **)&found.valloc = next_symbol("valloc");
    *(void **)&found.pvalloc = next_symbol("pvalloc");
    thread->resolving = 0;
    if (!found.malloc || !found.free || !found.calloc || !found.realloc) {
        static const char message[] = "memslope: cannot find the real malloc (dlsym RTLD_NEXT)\n";
        ssize_t ignored = write(2, message, sizeof message - 1);
        (void)ignored;
        _exit(127);
    }
    real = found;
    __atomic_store_n(&real_resolved, 1, __ATOMIC_RELEASE);
    errno = saved_errno;
}

/* True when `real` may be used; false while this thread is inside dlsym
 * (the caller then uses the bootstrap arena). */
static inline bool real_ready(void)
{
    if (LIKELY(__atomic_load_n(&real_resolved, __ATOMIC_ACQUIRE)))
        return true;
    if (this_thread.resolving)
        return false;
    resolve_real();
    return true;
}

/* ---- initialisation ------------------------------------------------------ */

static void thread_exit_destructor(void *value);
static void fork_child(void);
static void cross_held_set(struct shim_thread *thread);
static bool tracer_says_tsc(void);

/* Tells the leak scan where the shim's TLS is (its caches hold addresses
 * the program freed since): once the constructor found it, or at once for
 * a region made later (a fork child's). */
static void publish_own_tls(void)
{
    struct shm_header *header = region;
    if (!header || !own_tls_size)
        return;
    header->shim_tls_offset = own_tls_offset;
    header->shim_tls_size = own_tls_size;
}

static size_t round_up(size_t value, size_t to)
{
    return (value + to - 1) / to * to;
}

/* The image's thread memory, a part a ring slot. Without it threads record
 * all the same: every capture unwinds in full, and stacks keep the
 * interpreter's C frames where Python's would be. */
static void make_thread_memory(void)
{
    thread_memory_python = round_up(sizeof(struct capture_memory), 64);
    thread_part_bytes = round_up(thread_memory_python + python_thread_caches_size(), 4096);
    capture_cache_bytes = round_up(sizeof(struct capture_cache), 4096);
    thread_memory_bytes = (size_t)SHM_MAX_THREADS * thread_part_bytes + CAPTURE_CACHE_SLOTS * capture_cache_bytes;
    thread_memory = thread_memory_create(thread_memory_bytes, "memslope-threads");
}

/* Gives the thread the part of the slot it took (index): the memo starts
 * empty, since it names words of the stack of the slot's last thread (and
 * the capture cache, emptied at its first use: thread_captures); the
 * stack-id and Python caches are right for any thread of the image.
 * Published after the memo is emptied: a signal handler's capture sees no
 * part or a ready one. */
static void bind_thread_part(struct shim_thread *thread, uint32_t index)
{
    char *part = thread_memory ? (char *)thread_memory + (size_t)index * thread_part_bytes : NULL;
    struct capture_memory *kept = (struct capture_memory *)part;
    if (kept)
        kept->unwind_memo.count = 0;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    thread->kept = kept;
    thread->captures = NULL;
    thread->slot_captures =
        part && index < CAPTURE_CACHE_SLOTS
            ? (struct capture_cache *)((char *)thread_memory + (size_t)SHM_MAX_THREADS * thread_part_bytes +
                                       (size_t)index * capture_cache_bytes)
            : NULL;
    python_thread_caches_use(part ? part + thread_memory_python : NULL);
}

/* The thread lets go of its part (its slot is about to retire, or it is
 * a fork child's copy of its parent's): forgotten before anything else may
 * use the part, so that a signal handler's capture in between has none.
 * ending: the thread's own, whose capture cache's pages may go (never a
 * fork child's: the mapping is its parent's, which goes on using it). */
static void unbind_thread_part(struct shim_thread *thread, bool ending)
{
    struct capture_cache *used = thread->captures;
    thread->kept = NULL;
    thread->captures = thread->slot_captures = NULL;
    python_thread_caches_use(NULL);
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    /* a capture cache the thread filled gives its pages back (the slot's
     * next thread empties it anyway); a failure only keeps them */
    if (used && ending) {
        int saved_errno = errno;
        madvise(used, capture_cache_bytes, MADV_REMOVE);
        errno = saved_errno;
    }
}

/* Creates this process image's region and hands it to the tracer the
 * moment it exists: a process that execs or ends at once (or one the
 * tracer cannot ptrace) still has every event drained. */
static bool create_region(void)
{
    region = shm_region_create(&region_fd, (uint32_t)getpid(), max_frames, sample_rate,
                               clock_is_tsc ? SHM_CLOCK_TSC : SHM_CLOCK_MONOTONIC_NS);
    if (!region)
        return false;
    make_thread_memory();
    publish_own_tls();
    struct shm_header *header = region;
    header->stop_recording_address = (uint64_t)(uintptr_t)&record_state;
    header->stop_recording_value = RECORD_OFF;
    uint64_t socket_fd = shm_parse_u64(getenv(SHM_ENV_SOCKET), UINT64_MAX);
    if (socket_fd < 1024)
        shm_send_region_fd((int)socket_fd, region_fd);
    return true;
}

/* ---- unwind rules kept across recordings (fast_unwind.h) --------------------- */

/* The unwinder's modules and lookups, for the tracer to keep (struct
 * shm_unwind_module); called under the unwinder's lookup lock, or in a
 * fork child before it has a second thread. */
static void report_unwind_module(const struct fast_unwind_module_info *module)
{
    struct shm_header *header = region;
    if (!header || header->unwind_modules_used >= SHM_UNWIND_MODULES ||
        module->build_id_size > SHM_UNWIND_MAX_BUILD_ID)
        return;
    struct shm_unwind_module *entry = &shm_unwind_modules(region)[header->unwind_modules_used];
    *entry = (struct shm_unwind_module){module->start,         module->end,       module->bias,
                                        module->file_size,     module->build_id_size, module->rules_kept,
                                        {0}};
    memcpy(entry->build_id, module->build_id, module->build_id_size);
    __atomic_store_n(&header->unwind_modules_used, header->unwind_modules_used + 1, __ATOMIC_RELEASE);
}

static void report_unwind_rule(uint64_t ip, uint64_t rule)
{
    struct shm_header *header = region;
    if (!header)
        return;
    header->unwind_rules_looked_up++;
    if (header->unwind_rules_used >= SHM_UNWIND_RULES) {
        header->unwind_rules_dropped++;
        return;
    }
    shm_unwind_rules(region)[header->unwind_rules_used] = (struct shm_unwind_rule){ip, rule};
    __atomic_store_n(&header->unwind_rules_used, header->unwind_rules_used + 1, __ATOMIC_RELEASE);
}

/* From any unwind, a signal handler's too: one relaxed increment. */
static void count_unwind_rule_reused(void)
{
    struct shm_header *header = region;
    if (header)
        __atomic_fetch_add(&header->unwind_rules_reused, 1, __ATOMIC_RELAXED);
}

/* Rules kept in the symbol cache's folder, when the tracer names it. */
static void keep_unwind_rules(void)
{
    const char *directory = getenv(SHM_ENV_UNWIND_RULES);
    if (!directory || directory[0] != '/')
        return;
    static const struct fast_unwind_observer observer = {report_unwind_module, report_unwind_rule,
                                                         count_unwind_rule_reused};
    fast_unwind_keep_rules(directory, &observer);
}

/* The executable PT_LOAD of this library: leading backtrace frames in it are
 * the shim's own and are dropped. __ehdr_start avoids dl_iterate_phdr's lock
 * (the first malloc may come from inside the dynamic loader). */
extern const ElfW(Ehdr) __ehdr_start __attribute__((visibility("hidden")));

static void own_text_range(uintptr_t *start, uintptr_t *end)
{
    const ElfW(Ehdr) *ehdr = &__ehdr_start;
    const ElfW(Phdr) *phdr = (const ElfW(Phdr) *)((const char *)ehdr + ehdr->e_phoff);
    uintptr_t bias = 0;
    for (unsigned i = 0; i < ehdr->e_phnum; i++) {
        if (phdr[i].p_type == PT_LOAD && phdr[i].p_offset == 0) {
            bias = (uintptr_t)ehdr - phdr[i].p_vaddr;
            break;
        }
    }
    for (unsigned i = 0; i < ehdr->e_phnum; i++) {
        if (phdr[i].p_type == PT_LOAD && (phdr[i].p_flags & PF_X)) {
            *start = bias + phdr[i].p_vaddr;
            *end = *start + phdr[i].p_memsz;
        }
    }
}

static void find_own_text(void)
{
    own_text_range(&shim_text_start, &shim_text_end);
}

/* Runs once, with the guard up: everything it allocates is unrecorded. */
static bool start_recording(void)
{
    const char *pid_text = getenv(SHM_ENV_TRACER_PID);
    uint64_t pid = shm_parse_u64(pid_text, 0);
    if (pid == 0 || pid > INT32_MAX)
        return false;
    tracer_pid = (pid_t)pid;
    /* Only a process the tracer follows records: an untraced one (not
     * followed, or memslope already gone) would fill rings nobody drains. */
    const char *no_ptrace = getenv(SHM_ENV_NO_PTRACE);
    if (no_ptrace && no_ptrace[0] == '1') {
        /* Without ptrace only the command's own process is followed. */
        if (shm_parse_u64(getenv(SHM_ENV_TARGET_PID), 0) != (uint64_t)getpid())
            return false;
    } else if (!shm_traced_by(tracer_pid)) {
        return false;
    }
    uint64_t frames = shm_parse_u64(getenv(SHM_ENV_MAX_FRAMES), SHM_DEFAULT_MAX_FRAMES);
    if (frames < 1)
        frames = 1;
    if (frames > SHM_MAX_FRAMES_LIMIT)
        frames = SHM_MAX_FRAMES_LIMIT;
    max_frames = (uint32_t)frames;
    sample_rate = shm_parse_u64(getenv(SHM_ENV_SAMPLE_RATE), 0);
    const char *hold = getenv(SHM_ENV_HOLD);
    hold_enabled = sample_rate && hold && (hold[0] == '1' || strcmp(hold, "always") == 0) &&
                   !(no_ptrace && no_ptrace[0] == '1');
    hold_always = hold_enabled && strcmp(hold, "always") == 0;

    find_own_text();
    unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_PER_THREAD);
    if (pthread_key_create(&thread_exit_key, thread_exit_destructor) != 0)
        return false;
    clock_is_tsc = tracer_says_tsc();
    ring_writer_init(!(no_ptrace && no_ptrace[0] == '1'));
    if (!create_region())
        return false;
    keep_unwind_rules();
    /* Registered this early, our child handler runs before any the program
     * registers later (child handlers run in registration order), so the
     * child never writes into the parent's region. */
    if (pthread_atfork(NULL, NULL, fork_child) != 0)
        return false;
    return true;
}

/* The guard is up while the shim's own code may allocate (a rule lookup
 * with libdw, libunwind, a slot's pthread key, start-up): those
 * allocations are not the program's and pass through unrecorded. A signal
 * handler of the program that ran meanwhile would pass through too, and be
 * lost: the signal-storm test lost up to 300 of 500 handler allocations to
 * the main loop's first rule lookups. So guard_begin blocks the
 * asynchronous signals; their handlers run, recorded, as soon as the guard
 * drops. Two system calls, only on these rare paths. The hot paths that
 * raise the guard with a bare increment (operator delete and nothrow new,
 * CPython's domain wrappers) do not block signals: a handler that
 * allocates or frees inside their window goes unrecorded (a lost free
 * leaves a block live in the trace). Such a handler is async-signal-unsafe
 * to begin with: it runs inside the allocator. */
static void guard_begin(struct shim_thread *thread)
{
    if (thread->guard++ == 0) {
        sigset_t block;
        sigfillset(&block);
        static const int synchronous[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP, SIGSYS};
        for (size_t i = 0; i < sizeof synchronous / sizeof synchronous[0]; i++)
            sigdelset(&block, synchronous[i]);
        pthread_sigmask(SIG_BLOCK, &block, &thread->guard_saved_mask);
    }
}

static void guard_end(struct shim_thread *thread)
{
    if (--thread->guard == 0)
        pthread_sigmask(SIG_SETMASK, &thread->guard_saved_mask, NULL);
}

static bool decide_recording(struct shim_thread *thread)
{
    if (thread->guard || thread->resolving)
        return false;
    int state = RECORD_UNDECIDED;
    if (__atomic_compare_exchange_n(&record_state, &state, RECORD_INITIALISING, 0, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE)) {
        int saved_errno = errno;
        guard_begin(thread);
        if (!__atomic_load_n(&real_resolved, __ATOMIC_ACQUIRE))
            resolve_real();
        bool on = start_recording();
        guard_end(thread);
        errno = saved_errno;
        __atomic_store_n(&record_state, on ? RECORD_ON : RECORD_OFF, __ATOMIC_RELEASE);
        return on;
    }
    /* Another thread is initialising (only possible if threads exist
     * before the first allocation): wait, it is a few syscalls away. */
    while (state == RECORD_INITIALISING) {
        sched_yield();
        state = __atomic_load_n(&record_state, __ATOMIC_ACQUIRE);
    }
    return state == RECORD_ON;
}

static inline bool should_record(struct shim_thread *thread)
{
    int state = __atomic_load_n(&record_state, __ATOMIC_ACQUIRE);
    if (LIKELY(state == RECORD_ON))
        return thread->guard == 0 && !thread->no_slot;
    if (state == RECORD_OFF)
        return false;
    return decide_recording(thread) && !thread->no_slot;
}

static void stop_recording(void)
{
    __atomic_store_n(&record_state, RECORD_OFF, __ATOMIC_RELEASE);
}

/* The top of the calling thread's stack (one past its last byte), 0 when
 * unknown: the main thread's ends where the kernel put argc
 * (__libc_stack_end), another's where glibc allocated it. */
extern void *__libc_stack_end;

static uintptr_t own_stack_top(void)
{
    if (syscall(SYS_gettid) == getpid())
        return (uintptr_t)__libc_stack_end;
    pthread_attr_t attributes;
    void *base;
    size_t size;
    if (pthread_getattr_np(pthread_self(), &attributes) != 0)
        return 0;
    int rc = pthread_attr_getstack(&attributes, &base, &size);
    pthread_attr_destroy(&attributes);
    return rc == 0 ? (uintptr_t)base + size : 0;
}

/* Whether [from, top) holds value as an aligned word: 1, 0, or -1 when
 * some of it cannot be read or it is larger than a stack (256 MiB). Read
 * through process_vm_readv, so a range that is not mapped (a stack of the
 * program's own making) fails instead of faulting. */
#define STACK_SCAN_MAX ((uintptr_t)256 << 20)

static int stack_holds_word(uintptr_t from, uintptr_t top, uintptr_t value)
{
    if (top - from > STACK_SCAN_MAX)
        return -1; /* not the stack glibc says: a stack of the program's making */
    pid_t self = (pid_t)syscall(SYS_gettid); /* not getpid(): a main thread that called pthread_exit has no memory */
    uintptr_t words[512];
    for (uintptr_t at = from & ~(uintptr_t)7; at < top; at += sizeof words) {
        size_t want = top - at < sizeof words ? (size_t)(top - at) : sizeof words;
        struct iovec local = {words, want}, remote = {(void *)at, want};
        ssize_t got = process_vm_readv(self, &local, 1, &remote, 1, 0);
        if (got < (ssize_t)want)
            return -1;
        for (size_t i = 0; i < want / sizeof *words; i++)
            if (words[i] == value)
                return 1;
    }
    return 0;
}

/* Whether the calling thread runs in a signal handler
 * (shm_freeres_handler_probe). The kernel gives a handler restorer as its
 * return address, on the stack the handler runs on: the alternate signal
 * stack (sigaltstack then says SS_ONSTACK), or the thread's own, where
 * that word then lies above the frame that asks (stack_from: the shim's
 * own frames, whose locals hold restorer, are below it). A backtrace was
 * tried first and missed handlers without unwind tables (libunwind
 * guessed past them). 1 yes, 0 no, -1 cannot tell. Once, at the end of an
 * image, under the guard (pthread_getattr_np allocates). */
static int in_signal_handler_by_stack(void *restorer, const void *stack_from)
{
    stack_t alternate;
    if (sigaltstack(NULL, &alternate) == 0 && (alternate.ss_flags & SS_ONSTACK))
        return 1;
    struct shim_thread *thread = &this_thread;
    guard_begin(thread);
    uintptr_t top = own_stack_top(), from = (uintptr_t)stack_from;
    int verdict = top > from ? stack_holds_word(from, top, (uintptr_t)restorer) : -1;
    guard_end(thread);
    return verdict;
}

/* The end of a recorded process image, in the thread that ends it (from
 * exit() or _exit): glibc's and libstdc++'s freeres, as memcheck runs them
 * (preload/freeres.c), then, without ptrace, the leak check the process
 * runs itself (preload/exit_check.c; with ptrace the tracer checks at the
 * exit_group stop, which comes after). */
static void end_of_image(void)
{
    uint32_t other_threads;
    enum shm_freeres_outcome outcome =
        shm_freeres_run(&other_threads, in_signal_handler_by_stack, __builtin_frame_address(0));
    struct shm_header *header = region;
    if (outcome != SHM_FREERES_NOT_REACHED && header) {
        header->freeres_other_threads = other_threads;
        __atomic_store_n(&header->freeres_outcome, (uint32_t)outcome, __ATOMIC_RELEASE);
    }
    shm_exit_check_run();
}

static void exit_handler(void *unused)
{
    (void)unused;
    end_of_image();
}

extern int __cxa_atexit(void (*function)(void *), void *argument, void *dso_handle);

static bool exit_handler_registered;

/* From the constructor: registered before __libc_start_main registers
 * _dl_fini, the handler runs after it, that is after the program's atexit
 * handlers and every destructor (of the executable and of every library),
 * about where ptrace mode checks (the exit_group stop). No DSO handle, so
 * that the shim's own __cxa_finalize does not run it early. */
static void arm_end_of_image(void)
{
    struct shim_thread *thread = &this_thread;
    bool recording = __atomic_load_n(&record_state, __ATOMIC_ACQUIRE) == RECORD_ON;
    guard_begin(thread); /* __cxa_atexit may allocate: not the program's */
    shm_exit_check_arm(recording, tracer_pid);
    shm_freeres_arm(recording);
    if (recording)
        exit_handler_registered = __cxa_atexit(exit_handler, NULL, NULL) == 0;
    guard_end(thread);
}

/* The fallback when __cxa_atexit refused: the exit check still runs after
 * the program's own destructors (_dl_fini runs the executable's before the
 * preloaded shim's), but not freeres: libraries finalized after the shim
 * may still use what it would free. */
__attribute__((destructor)) static void shim_destructor(void)
{
    if (!exit_handler_registered)
        shm_exit_check_run();
}

/* dl_iterate_phdr's callback: data is this library's program headers,
 * which identify its entry; dlpi_tls_data is this thread's copy of its
 * PT_TLS segment. */
static int find_own_tls(struct dl_phdr_info *info, size_t size, void *data)
{
    if (info->dlpi_phdr != data)
        return 0;
    if (size < offsetof(struct dl_phdr_info, dlpi_tls_data) + sizeof info->dlpi_tls_data || !info->dlpi_tls_data)
        return 1;
#if defined(__x86_64__)
    uintptr_t thread_pointer; /* the TCB's self pointer, at %fs:0 */
    __asm__("mov %%fs:0, %0" : "=r"(thread_pointer));
    for (unsigned i = 0; i < info->dlpi_phnum; i++) {
        if (info->dlpi_phdr[i].p_type == PT_TLS) {
            own_tls_offset = (int64_t)((uintptr_t)info->dlpi_tls_data - thread_pointer);
            own_tls_size = info->dlpi_phdr[i].p_memsz;
        }
    }
#endif
    return 1;
}

/* From the constructor: the loader holds none of its locks here (the first
 * allocation, which may come from inside it, is no place for this). */
static void find_and_publish_own_tls(void)
{
    const ElfW(Ehdr) *ehdr = &__ehdr_start;
    dl_iterate_phdr(find_own_tls, (void *)((const char *)ehdr + ehdr->e_phoff));
    publish_own_tls();
}

static void start_python(void);

__attribute__((constructor)) static void shim_constructor(void)
{
    should_record(&this_thread);
    if (__atomic_load_n(&record_state, __ATOMIC_ACQUIRE) == RECORD_ON)
        find_and_publish_own_tls();
    arm_end_of_image();
    start_python();
}

/* ---- threads and fork ----------------------------------------------------- */

static bool ensure_slot(struct shim_thread *thread)
{
    if (LIKELY(thread->producer.slot != NULL))
        return true;
    int saved_errno = errno;
    guard_begin(thread);
    bool claimed = ring_claim_slot(region, &thread->producer, (uint32_t)syscall(SYS_gettid));
    if (claimed) {
        bind_thread_part(thread, thread->producer.index);
        pthread_setspecific(thread_exit_key, (void *)1); /* arms thread_exit_destructor */
    }
    else
        thread->no_slot = 1;
    guard_end(thread);
    errno = saved_errno;
    return claimed;
}

/* Zeroes the stack below the caller, where sending the held set left the
 * blocks' addresses: a main thread that leaves by pthread_exit keeps its
 * stack mapped, and the leak scan would find a lost block there and call
 * it reachable (memcheck's own frames leave nothing of ours). */
static __attribute__((noinline)) void scrub_stack_below(void)
{
    volatile char below[4096];
    memset((char *)below, 0, sizeof below);
    __asm__ volatile("" : : "r"(below) : "memory");
}

/* pthread key destructor: the thread is ending. Allocations made after this
 * (other TLS destructors) claim a new slot and re-arm the key; whatever the
 * thread frees after the last destructor round stays in an OWNED slot whose
 * tid is gone, which the tracer drains like a RETIRED one. */
static void thread_exit_destructor(void *value)
{
    (void)value;
    struct ring_producer *producer = &this_thread.producer;
    /* A copy made past glibc's fork (no fork handler ran) still points at
     * its parent's slot, owned by another thread: not ours to retire. */
    if (producer->slot && __atomic_load_n(&producer->slot->tid, __ATOMIC_ACQUIRE) != (uint32_t)syscall(SYS_gettid))
        producer->slot = NULL;
    /* What it holds crosses before the slot retires; what it allocates
     * from here on (later destructors) crosses at once. */
    this_thread.held.closed = 1;
    if (producer->slot) {
        cross_held_set(&this_thread);
        scrub_stack_below();
    } else
        this_thread.held.buckets = NULL; /* its parent's: the tracer took its copy from the fork */
    /* the slot's next thread may take the part once the slot retires (a
     * later destructor that allocates takes a slot and a part again) */
    unbind_thread_part(&this_thread, true);
    ring_retire_slot(region, producer);
}

/* A fork child's copies of its parent's held sets, unmapped: the leak scan
 * would take the addresses in them for pointers to the blocks. */
static void unmap_parent_held_sets(struct shim_thread *thread)
{
    thread->held.buckets = NULL;
    if (!region)
        return;
    const struct shm_header *header = region;
    uint32_t slots = __atomic_load_n(&header->slots_high_water, __ATOMIC_RELAXED);
    for (uint32_t i = 0; i < slots && i < SHM_MAX_THREADS; i++) {
        struct held_set copy = {.buckets = (struct shm_held_bucket *)(uintptr_t)shm_slot(region, i)->held_table};
        held_set_destroy(&copy);
    }
}

/* Child of fork: the inherited mapping is the parent's region (MAP_SHARED,
 * so writing into it would corrupt the parent's rings). Start a fresh one:
 * addresses and stack ids are per address space. */
static void fork_child(void)
{
    struct shim_thread *thread = &this_thread;
    owner_lock_forked(); /* where the kernel does not wipe the locks' epoch */
    /* no signal handler's capture before the child has a region of its own */
    guard_begin(thread);
    /* The parent's thread memory, shared with it: stack ids name the
     * parent's region (the child records in a new one, or not at all). */
    unbind_thread_part(thread, false);
    thread_memory_destroy(thread_memory, thread_memory_bytes);
    thread_memory = NULL;
    /* The copies of the parent's held sets: the tracer took those blocks
     * into the child's live table at the fork (a free that found one here
     * would send nothing, and the block would stay live for ever). */
    unmap_parent_held_sets(thread);
    if (__atomic_load_n(&record_state, __ATOMIC_ACQUIRE) != RECORD_ON) {
        guard_end(thread);
        return;
    }
    void *parent_region = region;
    close(region_fd);
    region_fd = -1;
    region = NULL;
    /* the parent's slot, in the region unmapped below: not ours, followed
     * or not (a thread that ends later must not retire it) */
    memset(&thread->producer, 0, sizeof thread->producer);
    const char *no_follow = getenv(SHM_ENV_NO_FOLLOW);
    if (no_follow && no_follow[0] == '1') {
        stop_recording();
    } else {
        thread->stack_tail = (struct stack_tail){0, 0}; /* the parent's pool: not in the child's region */
        thread->stamps_to_reuse = 0; /* the child's first event reads the clock, not a stamp from before the fork */
        thread->no_slot = 0;
        if (create_region()) {
            shm_freeres_forked(); /* a child not followed or not recorded runs no freeres: it is not ours */
            fast_unwind_announce_modules(); /* its lookups name them in its region */
        } else
            stop_recording();
    }
    python_runtime_fork(parent_region, region);
    munmap(parent_region, SHM_TOTAL_SIZE);
    guard_end(thread);
}

/* ---- events ------------------------------------------------------------------ */

static inline uint64_t now_ns(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now); /* vDSO: no syscall */
    return (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
}

/* The clock of event stamps: a free's is read before the real free, an
 * allocation's after the real allocator returned. Neither TSC read is
 * fenced (the fence cost 13% of the free path, and more of the
 * allocation's), so either may be read a few instructions early or late.
 * Between threads that can only make the tracer see an address reused
 * before its free, which the live table resolves (it keeps both blocks;
 * the free takes the older), or a free before its allocation, which the
 * recorder holds until the allocation arrives (tests/unit/test_recorder.c
 * covers both). */
static inline uint64_t read_clock(void)
{
#if defined(__x86_64__)
    if (LIKELY(clock_is_tsc))
        return __rdtsc();
#endif
    return now_ns();
}

/* How many events in a row may repeat a stamp while the process has one
 * recording thread. */
#define STAMP_REUSE_EVENTS 64u

/* An event's stamp. Stamps order the events of different threads; those
 * of one thread are in its ring's order already. So while the process has
 * a single recording thread (header->producers), the clock is read once
 * every STAMP_REUSE_EVENTS events and the others repeat the last reading
 * (flagged SHM_EVENT_STAMP_REPEATED): a TSC read costs 12.6 ns in a VM
 * here, a quarter of an event's cost. A repeated stamp is early, never
 * late, and the tracer places a flagged event no earlier than it last
 * looked at the thread's ring (shm_consumer.c), so its time is off by at
 * most the time between two drains (10 ms when the program is idle).
 *
 * A reading is repeated only if it was itself taken while this thread was
 * the only producer: after another thread stops, the first event reads the
 * clock again, so it and those repeating it come after every event of the
 * thread that stopped (whose blocks this one may free, and whose
 * addresses it may get again). */
struct stamp {
    uint64_t time;
    uint16_t flags; /* SHM_EVENT_STAMP_REPEATED or 0 */
};

static inline struct stamp fresh_stamp(struct shim_thread *thread)
{
    uint32_t producers = __atomic_load_n(&((const struct shm_header *)region)->producers, __ATOMIC_RELAXED);
    thread->stamps_to_reuse = producers == 1 ? STAMP_REUSE_EVENTS - 1 : 0;
    thread->last_stamp = read_clock();
    return (struct stamp){thread->last_stamp, 0};
}

static inline struct stamp event_stamp(struct shim_thread *thread)
{
    if (LIKELY(thread->stamps_to_reuse) &&
        __atomic_load_n(&((const struct shm_header *)region)->producers, __ATOMIC_RELAXED) == 1) {
        thread->stamps_to_reuse--;
        return (struct stamp){thread->last_stamp, SHM_EVENT_STAMP_REPEATED};
    }
    return fresh_stamp(thread);
}

/* The tracer decides once for the whole recording (tracer/tsc_check.h:
 * the kernel's clocksource, or a check that every processor reads the TSC
 * in step), so every process of it stamps with the same clock. */
static bool tracer_says_tsc(void)
{
#if defined(__x86_64__)
    const char *clock = getenv(SHM_ENV_CLOCK);
    return clock && strcmp(clock, "tsc") == 0;
#else
    return false;
#endif
}

/* Fills the thread's next ring place in place (see ring_reserve) with
 * one event; the tracer being gone stops recording: nobody will drain. */
static inline void put_event(struct shim_thread *thread, struct stamp stamp, uint64_t addr, uint64_t size,
                             uint32_t stack_id, uint8_t kind, uint8_t alloc_fn)
{
    struct shm_event *event = ring_reserve(&thread->producer, tracer_pid);
    if (UNLIKELY(!event)) {
        stop_recording();
        return;
    }
    event->time_ns = stamp.time;
    event->addr = addr;
    event->size = size;
    event->stack_id = stack_id;
    event->kind = kind;
    event->alloc_fn = alloc_fn;
    event->flags = stamp.flags;
    ring_commit(&thread->producer);
}

/* Adds to one of the slot's held counters in one instruction: a signal
 * handler on the same thread that counts too cannot interleave with it,
 * and the slot has one writer, so no lock. */
static inline void slot_count(uint64_t *counter, uint64_t value)
{
#if defined(__x86_64__)
    __asm__ volatile("addq %1, %0" : "+m"(*counter) : "r"(value));
#else
    __atomic_fetch_add(counter, value, __ATOMIC_RELAXED);
#endif
}

/* A set belongs to its slot: a thread takes over the one its slot's last
 * owner left (emptied at that thread's end), so that no set is unmapped
 * while other threads may look in it (free_held_elsewhere). */
static __attribute__((noinline, cold)) bool open_held_set(struct shim_thread *thread)
{
    struct shm_thread_slot *slot = thread->producer.slot;
    if (thread->held.closed)
        return false;
    uint64_t left = __atomic_load_n(&slot->held_table, __ATOMIC_ACQUIRE);
    if (left) {
        thread->held.buckets = (struct shm_held_bucket *)(uintptr_t)left;
        return true;
    }
    if (!held_set_create(&thread->held)) {
        thread->held.closed = 1;
        return false;
    }
    __atomic_store_n(&slot->held_table, (uint64_t)(uintptr_t)thread->held.buckets, __ATOMIC_RELEASE);
    __atomic_fetch_add(&((struct shm_header *)region)->held_sets_made, 1, __ATOMIC_RELEASE);
    return true;
}

/* Sends a block that left the set without its free (pushed out, a thread's
 * end), flagged SHM_EVENT_HELD: it was made outside any case, and its
 * stamp is when it left the set, not when it was made. */
static void send_held(struct shim_thread *thread, const struct held_block *block, uint16_t flags)
{
    slot_count(&thread->producer.slot->held_out_bytes, block->size);
    put_event(thread, (struct stamp){block->stamp, SHM_EVENT_HELD | flags}, block->address, block->size,
              SHM_STACK_NONE, SHM_EV_ALLOC, 0);
}

/* Brackets taking blocks out of the set and sending them (the slot's
 * held_sending): a fork between the two must not lose one. Plain stores:
 * the compare-and-swap that takes a block out is a full barrier after the
 * first, and the event's publication a release before the second. */
static inline void sending_held(struct shim_thread *thread, uint32_t sending)
{
    __atomic_store_n(&thread->producer.slot->held_sending, sending, __ATOMIC_RELAXED);
}

/* A case opened while the block went in: the tracer's stop at its
 * opening (memslope__case_opens) may have come before it, so it crosses
 * now, as made before the case, unless that stop took it. */
static __attribute__((noinline, cold)) void unhold_block(struct shim_thread *thread, void *pointer, size_t size)
{
    uint64_t address = (uint64_t)(uintptr_t)pointer, held_size;
    uint64_t stamp = read_clock(); /* before the take: see held_set_insert */
    sending_held(thread, 1);
    if (held_set_take_shared(thread->held.buckets, address, &held_size))
        send_held(thread, &(struct held_block){address, size, stamp}, 0);
    sending_held(thread, 0);
}

/* Whether the thread may hold a block of size: with two or more
 * recording threads (with one, the tracer has a processor of its own and
 * the set only costs), while the tracer says the image allocates fast
 * enough for holding to pay (hold_wanted: at 0.7 M events a second the
 * set cost the program more than the tracer's work did), not from a
 * handler that interrupted a set operation, with a set (made now if need
 * be). */
static inline __attribute__((always_inline)) bool may_hold(struct shim_thread *thread, size_t size)
{
    const struct shm_header *header = region;
    if (size > SHM_HELD_MAX_SIZE || thread->held.busy || thread->held.closed ||
        __atomic_load_n(&header->producers, __ATOMIC_RELAXED) < 2 ||
        !(hold_always || __atomic_load_n(&header->hold_wanted, __ATOMIC_RELAXED)))
        return false;
    if (LIKELY(thread->held.buckets != NULL))
        return true;
    if (__atomic_load_n(&header->case_state, __ATOMIC_ACQUIRE) & 1)
        return false; /* nothing is held in a case: no set made there either */
    /* a handler that allocates meanwhile must not make a set of its own */
    thread->held.busy++;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    bool opened = open_held_set(thread);
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    thread->held.busy--;
    return opened;
}

/* Keeps an unsampled allocation in the thread's held set instead of
 * sending it (held_set.h), if it may, outside any case. Returns false if
 * the caller must send it. */
static inline __attribute__((always_inline)) bool hold_block(struct shim_thread *thread, void *pointer, size_t size)
{
    const struct shm_header *header = region;
    if (!may_hold(thread, size))
        return false;
    uint64_t cases = __atomic_load_n(&header->case_state, __ATOMIC_ACQUIRE);
    if (cases & 1)
        return false;
    struct held_block out;
    struct shm_thread_slot *slot = thread->producer.slot;
    /* counted before the insert: the tracer reads no set whose count has
     * not moved since it emptied it (held_sets.c) */
    slot_count(&slot->held_in_bytes, size);
    thread->held.busy++;
    sending_held(thread, 1); /* in case the insert pushes a block out */
    held_set_insert(&thread->held, (uint64_t)(uintptr_t)pointer, size, read_clock, &out);
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    thread->held.busy--;
    if (UNLIKELY(__atomic_load_n(&header->case_state, __ATOMIC_SEQ_CST) != cases))
        unhold_block(thread, pointer, size);
    if (out.address)
        send_held(thread, &out, 0);
    sending_held(thread, 0);
    return true;
}

/* Sends whatever the thread still holds and lets go of the set: the
 * thread is ending. */
static __attribute__((noinline)) void cross_held_set(struct shim_thread *thread)
{
    if (!thread->held.buckets)
        return;
    struct held_block block;
    uint32_t cursor = 0;
    uint64_t stamp = read_clock(); /* before the takes: see held_set_insert */
    sending_held(thread, 1);
    while (held_set_take_next(&thread->held, &cursor, stamp, &block))
        send_held(thread, &block, 0);
    *(volatile uint64_t *)&block.address = 0; /* see scrub_stack_below */
    sending_held(thread, 0);
    thread->held.buckets = NULL; /* the set stays with the slot, empty */
}

/* Poisson sampling as tcmalloc does it: every byte is a sample point with
 * probability 1/sample_rate, so the gaps are exponential with mean
 * sample_rate and an allocation is sampled when it crosses one. */
static uint64_t next_random(struct shim_thread *thread)
{
    if (!thread->rng)
        thread->rng = now_ns() ^ ((uint64_t)(uintptr_t)thread * 0x9e3779b97f4a7c15ull) ^ 1;
    uint64_t x = thread->rng; /* xorshift64* */
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    thread->rng = x;
    return x * 0x2545f4914f6cdd1dull;
}

/* Natural log of a double in (0, 1] without libm: exponent times ln 2 plus
 * ln of the mantissa m in [1, 2) as 2 atanh((m-1)/(m+1)), four terms of
 * its series (error below 1e-5): ample for drawing sampling gaps. */
static double approx_ln(double value)
{
    union {
        double d;
        uint64_t bits;
    } u = {.d = value};
    int exponent = (int)((u.bits >> 52) & 0x7ff) - 1023;
    u.bits = (u.bits & 0x000fffffffffffffull) | 0x3ff0000000000000ull;
    double s = (u.d - 1.0) / (u.d + 1.0), s2 = s * s;
    double ln_mantissa = 2.0 * s * (1.0 + s2 * (1.0 / 3 + s2 * (1.0 / 5 + s2 * (1.0 / 7))));
    return exponent * 0.6931471805599453 + ln_mantissa;
}

static uint64_t next_sample_gap(struct shim_thread *thread)
{
    /* uniform in (0, 1]: 53 random bits plus one */
    double uniform = ((double)(next_random(thread) >> 11) + 1.0) / 9007199254740992.0;
    double gap = -approx_ln(uniform) * (double)sample_rate;
    return gap < 1.0 ? 1 : (uint64_t)gap;
}

static inline bool sampled(struct shim_thread *thread, size_t size)
{
    if (LIKELY(sample_rate == 0))
        return true;
    if (!thread->sample_primed) {
        thread->sample_primed = 1;
        thread->bytes_until_sample = next_sample_gap(thread);
    }
    if (size < thread->bytes_until_sample) {
        thread->bytes_until_sample -= size;
        return false;
    }
    thread->bytes_until_sample = next_sample_gap(thread);
    return true;
}

/* Room for the shim's own frames (the interposer, record_alloc) on top of
 * max_frames, so they can be dropped without losing a frame of the program. */
#define SHIM_FRAME_SLACK 6u

/* How far above the interposer's frame a caller's frame may lie: a bound on
 * the reads of a wrong rule, far beyond any real stack's depth of calls. */
#define FAST_UNWIND_STACK_SPAN (256ull << 20)

static inline bool in_shim_text(uint64_t ip)
{
    return ip >= shim_text_start && ip < shim_text_end;
}

static void remember_stack(struct stack_cache_entry *entry, uint64_t hash, uint32_t depth, uint32_t id)
{
    /* hash last, with hash 0 in between: a signal handler reading the entry
     * meanwhile sees a miss or a complete entry, never a mix */
    __atomic_store_n(&entry->hash, 0, __ATOMIC_RELAXED);
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    entry->depth = depth;
    entry->id = id;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    __atomic_store_n(&entry->hash, hash, __ATOMIC_RELAXED);
}

/* The id of a stack the thread's cache knows (kept: its capture memory, or
 * NULL: none). */
static inline bool cached_stack_id(const struct capture_memory *kept, uint64_t hash, uint32_t depth, uint32_t *id)
{
    if (!kept)
        return false;
    const struct stack_cache_entry *cached = &kept->stack_cache[hash & (STACK_CACHE_ENTRIES - 1)];
    if (__atomic_load_n(&cached->hash, __ATOMIC_RELAXED) != hash || cached->depth != depth)
        return false;
    *id = cached->id;
    return true;
}

/* The id of a stack from the shared table, which inserts it if new. */
static inline uint32_t new_stack_id(struct shim_thread *thread, uint64_t hash, const uint64_t *frames, uint32_t depth)
{
    uint32_t id = stack_table_intern(region, hash, frames, depth, thread->capturing == 1 ? &thread->stack_tail : NULL);
    /* only the outermost capture updates the cache, so a signal handler's
     * update cannot interleave with ours */
    if (id != SHM_STACK_NONE && thread->capturing == 1 && thread->kept)
        remember_stack(&thread->kept->stack_cache[hash & (STACK_CACHE_ENTRIES - 1)], hash, depth, id);
    return id;
}

/* The thread's capture cache, emptied at its first use: most threads
 * never capture Python frames, and their slot's cache (400 KiB, of which
 * emptying writes 7 KiB) stays untouched. NULL: none for its slot.
 * Outermost captures only, as the cache. */
static struct capture_cache *thread_captures(struct shim_thread *thread)
{
    if (LIKELY(thread->captures != NULL) || !thread->slot_captures)
        return thread->captures;
    capture_cache_clear(thread->slot_captures);
    thread->captures = thread->slot_captures;
    return thread->captures;
}

/* The words a merge from key reads, and the unwind's, into the thread's
 * capture cache with the stack id they gave. Out of line and only for a
 * stack that came before: most of a program's start-up captures come
 * once (python3 -c pass: 16,099 of 22,730), and logging each merge's reads
 * cost it a quarter more instructions (97 M -> 130 M for all of
 * python3 -c pass under callgrind). */
static __attribute__((noinline)) void remember_python_capture(struct shim_thread *thread,
                                                              const struct capture_key *key,
                                                              const struct fast_unwind_regs *start, int unwound,
                                                              const uint64_t *native, uint32_t native_depth,
                                                              uint32_t id)
{
    /* a stack whose words do not fit an entry is not walked for them
     * (python3 -c pass: the import machinery's 20 Python frames and more,
     * again and again) */
    uint32_t native_reads = 2 * (uint32_t)unwound + 1; /* a return address and a saved rbp a frame, the end */
    struct capture_cache *captures = thread_captures(thread);
    if (!captures || native_reads >= READ_SET_MAX ||
        !python_frames_at_most((const void *)(uintptr_t)key->python_frame,
                               (READ_SET_MAX - native_reads) / PYTHON_MERGE_READS_PER_FRAME))
        return;
    uint64_t merged[SHM_MAX_FRAMES_LIMIT];
    struct read_set reads;
    read_set_clear(&reads);
    python_merge_frames(region, (const void *)(uintptr_t)key->python_frame, native, native_depth, NULL, merged,
                        max_frames, &reads);
    bool bp_matters;
    if (fast_unwind_memo_reads(&thread->kept->unwind_memo, start, unwound, (int)max_frames, &reads, &bp_matters))
        capture_cache_store(captures, key, bp_matters, &reads, id);
}

/* The id of a native backtrace with the thread's Python frames merged in.
 * The merge writes the whole stack only for a stack the cache does not
 * know; native_suffix (the memo's, or NULL) spares hashing the native
 * frames it keeps. A stack the thread has seen lately goes into its
 * capture cache, when the memo holds the whole unwind (native_suffix and
 * unwound frames). Out of line: the C interposers' path stays as it was. */
static __attribute__((noinline)) uint32_t python_stack_id(struct shim_thread *thread, const struct capture_key *key,
                                                          const struct fast_unwind_regs *start, int unwound,
                                                          const uint64_t *native, uint32_t native_depth,
                                                          const struct fast_unwind_memo_frame *native_suffix)
{
    uint64_t merged[SHM_MAX_FRAMES_LIMIT];
    struct python_merge merge = python_merge_frames(region, (const void *)(uintptr_t)key->python_frame, native,
                                                    native_depth, native_suffix, merged, max_frames, NULL);
    uint64_t hash = stack_hash_finish(merge.hash, merge.depth);
    uint32_t id;
    if (!cached_stack_id(thread->kept, hash, merge.depth, &id)) {
        python_merge_complete(&merge, native, merged);
        return new_stack_id(thread, hash, merged, merge.depth);
    }
    if (native_suffix)
        remember_python_capture(thread, key, start, unwound, native, native_depth, id);
    return id;
}

/* A capture with Python frames the thread's cache still holds: its id
 * without an unwind. *key: where the capture starts (capture_cache.h).
 * The registers come as values: the interposer has just stored them
 * apart, and a copy of them as one 16-byte load stalled on store
 * forwarding (perf: half of this function's samples). Out of line, as
 * python_stack_id. */
static __attribute__((noinline)) bool python_cached_stack_id(struct shim_thread *thread, uint64_t ip, uint64_t sp,
                                                             uint64_t bp, struct capture_key *key, uint32_t *id)
{
    key->ip = ip;
    key->sp = sp;
    key->bp = bp;
    key->python_frame = (uint64_t)(uintptr_t)python_current_frame(&key->python_instruction);
    struct capture_cache *captures = thread_captures(thread);
    return captures && capture_cache_find(captures, key, id);
}

/* always_inline: every shim frame between the program and unw_backtrace
 * costs an unwind step (about 100 instructions) only to be dropped. */
static inline __attribute__((always_inline)) uint32_t capture_stack(struct shim_thread *thread, size_t size)
{
    if (!sampled(thread, size))
        return SHM_STACK_NONE;
    uint64_t frames[SHM_MAX_FRAMES_LIMIT + SHIM_FRAME_SLACK];
    thread->capturing++;
    int saved_errno = errno;
    /* Inlined into the interposer, whose frame (the shim is built with
     * frame pointers) gives the program's frame to start from. */
    struct fast_unwind_regs start = FAST_UNWIND_CALLER_REGS();
    /* From cached rules, nothing is allocated or locked: a signal handler
     * that allocates meanwhile is recorded like any code. Only a rule
     * lookup or libunwind (which allocate) run under the guard, with the
     * program's signals held until it drops (guard_begin). */
    struct capture_memory *memory = thread->capturing == 1 ? thread->kept : NULL;
    struct fast_unwind_memo *memo = memory ? &memory->unwind_memo : NULL;
    /* Python frames only in the outermost capture: not from a signal
     * handler, which may have interrupted the interpreter while it links
     * a frame */
    bool with_python = python_frames_enabled && memo;
    struct capture_key python_key;
    uint32_t id = SHM_STACK_NONE;
    if (with_python && python_cached_stack_id(thread, start.ip, start.sp, start.bp, &python_key, &id)) {
        errno = saved_errno;
        thread->capturing--;
        return id;
    }
    struct fast_unwind_result unwound = {.frames = frames};
    int got = fast_unwind(&start, start.sp + FAST_UNWIND_STACK_SPAN, frames, (int)max_frames, 0, memo, &unwound);
    bool hashed = got > 0; /* unwound.hash covers all got frames */
    if (UNLIKELY(got < 0)) {
        guard_begin(thread);
        if (got == FAST_UNWIND_NEEDS_LOOKUP)
            got = fast_unwind(&start, start.sp + FAST_UNWIND_STACK_SPAN, frames, (int)max_frames, 1, memo,
                              &unwound);
        hashed = got > 0;
        if (got < 0) {
            got = unw_backtrace((void **)frames, (int)(max_frames + SHIM_FRAME_SLACK));
            unwound.frames = frames;
            unwound.suffix = NULL;
        }
        guard_end(thread);
    }
    errno = saved_errno;
    if (got > 0) {
        uint32_t skip = 0;
        while (skip < (uint32_t)got && in_shim_text(unwound.frames[skip]))
            skip++;
        uint32_t depth = (uint32_t)got - skip;
        if (depth > max_frames)
            depth = max_frames;
        const uint64_t *kept = unwound.frames + skip;
        if (with_python) {
            /* Python frames in place of the interpreter's C frames */
            id = python_stack_id(thread, &python_key, &start, got, kept, depth,
                                 unwound.suffix && skip + depth == (uint32_t)got ? unwound.suffix + skip : NULL);
        } else {
            uint64_t hash = hashed && skip == 0 && depth == (uint32_t)got ? stack_hash_finish(unwound.hash, depth)
                                                                         : stack_hash(kept, depth);
            if (!cached_stack_id(thread->kept, hash, depth, &id))
                id = new_stack_id(thread, hash, kept, depth);
        }
    }
    thread->capturing--;
    return id;
}

/* A block another thread holds, freed here: taken out of that thread's
 * set (*size: its size). Every slot's set is looked in: the owner is not
 * known. */
static __attribute__((noinline)) bool free_held_elsewhere(struct shim_thread *thread, void *pointer, uint64_t *size)
{
    const struct shm_header *header = region;
    struct shm_thread_slot *own = thread->producer.slot;
    uint32_t slots = __atomic_load_n(&header->slots_high_water, __ATOMIC_ACQUIRE);
    for (uint32_t i = 0; i < slots && i < SHM_MAX_THREADS; i++) {
        struct shm_thread_slot *slot = shm_slot(region, i);
        uint64_t table = __atomic_load_n(&slot->held_table, __ATOMIC_ACQUIRE);
        if (table && slot != own &&
            held_set_take_shared((struct shm_held_bucket *)(uintptr_t)table, (uint64_t)(uintptr_t)pointer, size))
            return true;
    }
    return false;
}

/* What a free found of its block in the held sets, having taken it out. */
struct held_found {
    enum held_take take; /* HELD_NOT: in no set, the free crosses as any free */
    uint64_t size;
};

/* Whether frees may find their blocks in the sets: not once the tracer has
 * taken every set for the case now open (held_taken_state), nothing being
 * held in a case. A free between the case's opening and that take looks:
 * crossing, it would leave its block in a set, for the take to count live. */
static inline bool sets_may_hold(const struct shm_header *header)
{
    uint64_t cases = __atomic_load_n(&header->case_state, __ATOMIC_ACQUIRE);
    return !(cases & 1) || __atomic_load_n(&header->held_taken_state, __ATOMIC_ACQUIRE) != cases;
}

/* Takes the block at pointer out of this thread's set or another's, if
 * one holds it; counts nothing (settle_held_free does). Looked for before
 * the free's stamp is read: a block pushed out of its set is stamped
 * before it leaves it, so a free that misses it is stamped later. */
static inline __attribute__((always_inline)) struct held_found take_held(struct shim_thread *thread, void *pointer)
{
    struct held_found found = {HELD_NOT, 0};
    if (LIKELY(!hold_enabled))
        return found;
    const struct shm_header *header = region;
    uint32_t sets = __atomic_load_n(&header->held_sets_made, __ATOMIC_ACQUIRE);
    if (LIKELY(sets == 0) || !sets_may_hold(header))
        return found;
    /* With one thread recording the others have ended, their sets emptied
     * (or left to the tracer by a raw exit) */
    bool others = __atomic_load_n(&header->producers, __ATOMIC_RELAXED) > 1;
    if (thread->held.buckets) {
        found.take = held_set_take(&thread->held, (uint64_t)(uintptr_t)pointer, &found.size,
                                   &thread->producer.slot->held_epoch);
        if (LIKELY(found.take != HELD_NOT) || !others || sets < 2)
            return found;
    } else if (!others) {
        return found;
    }
    if (free_held_elsewhere(thread, pointer, &found.size))
        found.take = HELD_PAIR;
    return found;
}

/* The free of a block take_held found: a pair that never crosses, counted
 * in this thread's slot; or, if the tracer stopped the thread inside the
 * take (and may have taken the block too), a free that crosses flagged
 * SHM_EVENT_HELD with its size, stamped stamp, for the tracer to settle. */
static void settle_held_free(struct shim_thread *thread, void *pointer, struct held_found found, struct stamp stamp)
{
    struct shm_thread_slot *slot = thread->producer.slot;
    if (LIKELY(found.take == HELD_PAIR)) {
        slot_count(&slot->held_pairs, 1);
        slot_count(&slot->held_pair_bytes, found.size);
        return;
    }
    slot_count(&slot->held_out_bytes, found.size);
    stamp.flags |= SHM_EVENT_HELD;
    put_event(thread, stamp, (uint64_t)(uintptr_t)pointer, found.size, SHM_STACK_NONE, SHM_EV_FREE, 0);
}

/* Whether the free of pointer is a held pair (counted, nothing crosses) or
 * settled by the tracer: the block was in this thread's set or another's.
 * Checked before the free's stamp is read, which a pair does not need. */
static inline __attribute__((always_inline)) bool free_held(struct shim_thread *thread, void *pointer)
{
    struct held_found found = take_held(thread, pointer);
    if (found.take == HELD_NOT)
        return false;
    settle_held_free(thread, pointer, found,
                     found.take == HELD_UNSETTLED ? event_stamp(thread) : (struct stamp){0, 0});
    return true;
}

/* A free the wrapper records before the real free (see shm_event). */
static inline __attribute__((always_inline)) void record_free_before(struct shim_thread *thread, void *pointer)
{
    if (!ensure_slot(thread) || free_held(thread, pointer))
        return;
    put_event(thread, event_stamp(thread), (uint64_t)(uintptr_t)pointer, 0, SHM_STACK_NONE, SHM_EV_FREE, 0);
}

/* always_inline into each interposer, for the same reason as capture_stack:
 * the only shim frame left to unwind and drop is the interposer's own. */
static inline __attribute__((always_inline)) void record_alloc(void *pointer, size_t size, enum shm_alloc_fn fn)
{
    struct shim_thread *thread = &this_thread;
    if (!ensure_slot(thread))
        return;
    uint32_t stack_id = capture_stack(thread, size);
    if (stack_id == SHM_STACK_NONE && hold_enabled && hold_block(thread, pointer, size))
        return;
    struct stamp stamp = event_stamp(thread); /* after the real allocator returned */
    put_event(thread, stamp, (uint64_t)(uintptr_t)pointer, size, stack_id, SHM_EV_ALLOC, (uint8_t)fn);
}

void memslope__case_opens(void);

/* The tracer's breakpoint: a case opens while threads may hold blocks.
 * It takes every set with the world stopped, so that none of the blocks
 * held before the case is freed unseen inside it (hold_block checks the
 * state again after an insert, for one the stop came too early for). */
SHIM_EXPORT __attribute__((noinline)) void memslope__case_opens(void)
{
    __asm__ volatile("" ::: "memory");
}

/* The marker API's cases as the held set sees them (shm_header.case_state):
 * a case opens before its marker's stamp is read, and closes after its end
 * marker is written. The full fence makes the change visible before the
 * clock is read after it. */
static void change_case_state(bool open)
{
    struct shm_header *header = region;
    uint64_t state = __atomic_load_n(&header->case_state, __ATOMIC_RELAXED);
    do {
        if ((state & 1) == (uint64_t)open)
            return; /* another thread's marker changed it first */
    } while (!__atomic_compare_exchange_n(&header->case_state, &state, (((state >> 1) + 1) << 1) | (uint64_t)open,
                                          false, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED));
    if (open && __atomic_load_n(&header->held_sets_made, __ATOMIC_ACQUIRE))
        memslope__case_opens();
    else if (open) /* no set to take, so frees in the case look in none (an insert that raced this sends its block) */
        __atomic_store_n(&header->held_taken_state, (((state >> 1) + 1) << 1) | 1, __ATOMIC_RELEASE);
#if defined(__x86_64__)
    __asm__ volatile("lfence" ::: "memory"); /* the marker's TSC read comes after the store */
#endif
}

static void record_marker(enum shm_event_kind kind, uint64_t addr, uint64_t size)
{
    struct shim_thread *thread = &this_thread;
    if (!should_record(thread) || !ensure_slot(thread))
        return;
    if (kind != SHM_EV_CASE_END)
        change_case_state(true); /* a case begins, or an iteration outside one opens one */
    /* Markers always read the clock, and the events after one repeat that
     * reading, not an older one: a thread's stamps never go backwards. */
    put_event(thread, fresh_stamp(thread), addr, size, SHM_STACK_NONE, (uint8_t)kind, 0);
    if (kind == SHM_EV_CASE_END)
        change_case_state(false);
}

/* ---- C++ operator new and delete ------------------------------------------- */

/* Every form of the global operators, C++98 to C++17, each forwarding to
 * the next definition: libstdc++'s, or that of a preloaded tcmalloc or
 * jemalloc, which serve them without calling malloc and were not recorded
 * at all before these. The program's one new is one allocation, as
 * memcheck (which replaces the operators whole) counts it; what the next
 * operator does inside is its own doing:
 * - the forms that cannot throw (nothrow new, every delete) run with the
 *   guard up (a bare increment: see guard_begin for what a signal handler
 *   does meanwhile), so nothing they do is recorded (libstdc++'s nothrow new
 *   calls new, which may throw and catch bad_alloc inside: an exception
 *   object allocated and freed that memcheck never sees);
 * - a throwing new cannot: the guard would stay up when std::bad_alloc is
 *   thrown through our frame, and the shim is C, without cleanups run by
 *   an exception (-fexceptions would add libgcc_s to every process, and
 *   with it fewer allocations than memcheck sees in glibc's own lazy load
 *   of libgcc_s). The allocator it calls is told apart by where it is
 *   called from instead (operator_nested_call): libstdc++'s new calls
 *   malloc, its aligned new aligned_alloc, its new[] jumps to new. */
enum operator_form {
    OPERATOR_NEW,
    OPERATOR_NEW_ARRAY,
    OPERATOR_NEW_NOTHROW,
    OPERATOR_NEW_ARRAY_NOTHROW,
    OPERATOR_NEW_ALIGNED,
    OPERATOR_NEW_ARRAY_ALIGNED,
    OPERATOR_NEW_ALIGNED_NOTHROW,
    OPERATOR_NEW_ARRAY_ALIGNED_NOTHROW,
    OPERATOR_DELETE,
    OPERATOR_DELETE_ARRAY,
    OPERATOR_DELETE_NOTHROW,
    OPERATOR_DELETE_ARRAY_NOTHROW,
    OPERATOR_DELETE_SIZED,
    OPERATOR_DELETE_ARRAY_SIZED,
    OPERATOR_DELETE_ALIGNED,
    OPERATOR_DELETE_ARRAY_ALIGNED,
    OPERATOR_DELETE_ALIGNED_NOTHROW,
    OPERATOR_DELETE_ARRAY_ALIGNED_NOTHROW,
    OPERATOR_DELETE_SIZED_ALIGNED,
    OPERATOR_DELETE_ARRAY_SIZED_ALIGNED,
    OPERATOR_FORM_COUNT
};

/* Itanium C++ ABI names; std::size_t is unsigned long ("m") on LP64. */
#if __SIZEOF_SIZE_T__ == 8
#define MANGLED_SIZE "m"
#else
#define MANGLED_SIZE "j"
#endif
#define MANGLED_NOTHROW "RKSt9nothrow_t"
#define MANGLED_ALIGN "St11align_val_t"

static const char *const operator_symbols[OPERATOR_FORM_COUNT] = {
    [OPERATOR_NEW] = "_Znw" MANGLED_SIZE,
    [OPERATOR_NEW_ARRAY] = "_Zna" MANGLED_SIZE,
    [OPERATOR_NEW_NOTHROW] = "_Znw" MANGLED_SIZE MANGLED_NOTHROW,
    [OPERATOR_NEW_ARRAY_NOTHROW] = "_Zna" MANGLED_SIZE MANGLED_NOTHROW,
    [OPERATOR_NEW_ALIGNED] = "_Znw" MANGLED_SIZE MANGLED_ALIGN,
    [OPERATOR_NEW_ARRAY_ALIGNED] = "_Zna" MANGLED_SIZE MANGLED_ALIGN,
    [OPERATOR_NEW_ALIGNED_NOTHROW] = "_Znw" MANGLED_SIZE MANGLED_ALIGN MANGLED_NOTHROW,
    [OPERATOR_NEW_ARRAY_ALIGNED_NOTHROW] = "_Zna" MANGLED_SIZE MANGLED_ALIGN MANGLED_NOTHROW,
    [OPERATOR_DELETE] = "_ZdlPv",
    [OPERATOR_DELETE_ARRAY] = "_ZdaPv",
    [OPERATOR_DELETE_NOTHROW] = "_ZdlPv" MANGLED_NOTHROW,
    [OPERATOR_DELETE_ARRAY_NOTHROW] = "_ZdaPv" MANGLED_NOTHROW,
    [OPERATOR_DELETE_SIZED] = "_ZdlPv" MANGLED_SIZE,
    [OPERATOR_DELETE_ARRAY_SIZED] = "_ZdaPv" MANGLED_SIZE,
    [OPERATOR_DELETE_ALIGNED] = "_ZdlPv" MANGLED_ALIGN,
    [OPERATOR_DELETE_ARRAY_ALIGNED] = "_ZdaPv" MANGLED_ALIGN,
    [OPERATOR_DELETE_ALIGNED_NOTHROW] = "_ZdlPv" MANGLED_ALIGN MANGLED_NOTHROW,
    [OPERATOR_DELETE_ARRAY_ALIGNED_NOTHROW] = "_ZdaPv" MANGLED_ALIGN MANGLED_NOTHROW,
    [OPERATOR_DELETE_SIZED_ALIGNED] = "_ZdlPv" MANGLED_SIZE MANGLED_ALIGN,
    [OPERATOR_DELETE_ARRAY_SIZED_ALIGNED] = "_ZdaPv" MANGLED_SIZE MANGLED_ALIGN,
};

static void *next_operators[OPERATOR_FORM_COUNT]; /* resolved on first use */

/* The code of every next operator resolved so far, and the span that
 * holds them all (checked first: one library's operators lie together). */
struct code_range {
    uintptr_t start, end;
};
static struct code_range operator_code[OPERATOR_FORM_COUNT];
static uint32_t operator_code_count;
static uintptr_t operator_code_low = UINTPTR_MAX, operator_code_high;
static bool operators_forwarded; /* an operator was resolved: the checks below are needed */
/* owner_lock.h: a fork child whose parent's other thread was in here takes
 * it over (what it guards is whole at every step: the count moves last). */
static struct owner_lock operator_code_lock = OWNER_LOCK_INIT;

/* The definition the caller would reach without the shim. Usually the next
 * one in the global scope. But a C++ library dlopen'ed RTLD_LOCAL (a C++
 * extension of Python, which is no C++ program) brings a libstdc++ that
 * is outside it, and the library's calls still come here, the global scope
 * being searched first: then the first loaded object that defines the
 * function, in load order. The first answer serves every later call. */
static void *find_next_operator(enum operator_form form)
{
    const char *symbol = operator_symbols[form];
    void *found = dlsym(RTLD_NEXT, symbol);
    if (found)
        return found;
    uintptr_t own_start = 0, own_end = 0;
    own_text_range(&own_start, &own_end); /* not known yet when not recording */
    return shm_find_function(symbol, own_start, own_end);
}

/* Remembers where the next operator's code is, from its symbol's size. A
 * size of 0 (a symbol without one) covers its first instruction only: its
 * nested calls are then recorded, as before the operators were
 * interposed. */
static void remember_operator_code(const void *function)
{
    Dl_info info;
    const ElfW(Sym) *symbol = NULL;
    uintptr_t start = (uintptr_t)function, size = 1;
    if (dladdr1(function, &info, (void **)&symbol, RTLD_DL_SYMENT) && symbol &&
        (uintptr_t)info.dli_saddr == start && symbol->st_size > 0)
        size = symbol->st_size;
    owner_lock_acquire(&operator_code_lock);
    uint32_t count = __atomic_load_n(&operator_code_count, __ATOMIC_RELAXED);
    bool known = false;
    for (uint32_t i = 0; i < count; i++)
        known = known || operator_code[i].start == start; /* aliases: tcmalloc's new is its new[] */
    if (!known && count < OPERATOR_FORM_COUNT) {
        operator_code[count] = (struct code_range){start, start + size};
        if (start < __atomic_load_n(&operator_code_low, __ATOMIC_RELAXED))
            __atomic_store_n(&operator_code_low, start, __ATOMIC_RELAXED);
        if (start + size > __atomic_load_n(&operator_code_high, __ATOMIC_RELAXED))
            __atomic_store_n(&operator_code_high, start + size, __ATOMIC_RELAXED);
        __atomic_store_n(&operator_code_count, count + 1, __ATOMIC_RELEASE);
    }
    __atomic_store_n(&operators_forwarded, true, __ATOMIC_RELEASE);
    owner_lock_release(&operator_code_lock);
}

static __attribute__((noinline, cold)) void *resolve_operator(enum operator_form form)
{
    (void)real_ready(); /* dlsym may call calloc: `real` must be known first */
    struct shim_thread *thread = &this_thread;
    int saved_errno = errno;
    guard_begin(thread); /* dlsym may allocate: not the program's */
    void *found = find_next_operator(form);
    if (found)
        remember_operator_code(found);
    discard_dl_error();
    guard_end(thread);
    errno = saved_errno;
    if (!found) {
        static const char message[] = "memslope: cannot find the C++ operator that the shim forwards to (no "
                                      "definition after libmemslope.so, nor in any loaded object)\n";
        ssize_t ignored = write(2, message, sizeof message - 1);
        (void)ignored;
        abort();
    }
    __atomic_store_n(&next_operators[form], found, __ATOMIC_RELEASE);
    return found;
}

/* Whether an entry point was called by a next operator, directly (libstdc++'s
 * new calls malloc) or by a tail call, which leaves the return address of
 * our own call to it (libstdc++'s new[] jumps to new, its aligned delete to
 * free): that call is part of the operator the program called, which the
 * shim records once. One load and a branch while no operator was
 * forwarded. */
static inline bool operator_nested_call(const void *return_address)
{
    if (LIKELY(!__atomic_load_n(&operators_forwarded, __ATOMIC_ACQUIRE)))
        return false;
    uintptr_t ip = (uintptr_t)return_address;
    if (in_shim_text(ip))
        return true;
    if (ip < __atomic_load_n(&operator_code_low, __ATOMIC_RELAXED) ||
        ip >= __atomic_load_n(&operator_code_high, __ATOMIC_RELAXED))
        return false;
    uint32_t count = __atomic_load_n(&operator_code_count, __ATOMIC_ACQUIRE);
    for (uint32_t i = 0; i < count; i++)
        if (ip >= operator_code[i].start && ip < operator_code[i].end)
            return true;
    return false;
}

static inline void *next_operator(enum operator_form form)
{
    void *next = __atomic_load_n(&next_operators[form], __ATOMIC_ACQUIRE);
    return LIKELY(next != NULL) ? next : resolve_operator(form);
}

typedef void *(*operator_new_fn)(size_t);
typedef void *(*operator_new_nothrow_fn)(size_t, const void *);
typedef void *(*operator_new_aligned_fn)(size_t, size_t);
typedef void *(*operator_new_aligned_nothrow_fn)(size_t, size_t, const void *);

static inline __attribute__((always_inline)) void *call_operator_new(enum operator_form form, void *next, size_t size,
                                                                      size_t alignment, const void *nothrow)
{
    switch (form) {
    case OPERATOR_NEW_NOTHROW:
    case OPERATOR_NEW_ARRAY_NOTHROW:
        return ((operator_new_nothrow_fn)next)(size, nothrow);
    case OPERATOR_NEW_ALIGNED:
    case OPERATOR_NEW_ARRAY_ALIGNED:
        return ((operator_new_aligned_fn)next)(size, alignment);
    case OPERATOR_NEW_ALIGNED_NOTHROW:
    case OPERATOR_NEW_ARRAY_ALIGNED_NOTHROW:
        return ((operator_new_aligned_nothrow_fn)next)(size, alignment, nothrow);
    default:
        return ((operator_new_fn)next)(size);
    }
}

static inline enum shm_alloc_fn operator_new_alloc_fn(enum operator_form form)
{
    switch (form) {
    case OPERATOR_NEW_ARRAY:
    case OPERATOR_NEW_ARRAY_NOTHROW:
        return SHM_FN_OPERATOR_NEW_ARRAY;
    case OPERATOR_NEW_ALIGNED:
    case OPERATOR_NEW_ALIGNED_NOTHROW:
        return SHM_FN_OPERATOR_NEW_ALIGNED;
    case OPERATOR_NEW_ARRAY_ALIGNED:
    case OPERATOR_NEW_ARRAY_ALIGNED_NOTHROW:
        return SHM_FN_OPERATOR_NEW_ARRAY_ALIGNED;
    default:
        return SHM_FN_OPERATOR_NEW;
    }
}

/* always_inline into each exported operator, as record_alloc: the
 * backtrace starts from the exported function's frame. */
static inline __attribute__((always_inline)) void *operator_new(enum operator_form form, size_t size,
                                                                 size_t alignment, const void *nothrow)
{
    const void *caller = __builtin_return_address(0);
    void *next = next_operator(form);
    struct shim_thread *thread = &this_thread;
    void *pointer;
    if (nothrow) {
        thread->guard++;
        pointer = call_operator_new(form, next, size, alignment, nothrow);
        thread->guard--;
    } else {
        pointer = call_operator_new(form, next, size, alignment, nothrow);
    }
    if (LIKELY(pointer != NULL) && should_record(thread) && !operator_nested_call(caller))
        record_alloc(pointer, size, operator_new_alloc_fn(form));
    return pointer;
}

typedef void (*operator_delete_fn)(void *);
typedef void (*operator_delete_nothrow_fn)(void *, const void *);
typedef void (*operator_delete_sized_fn)(void *, size_t); /* also (pointer, alignment) */
typedef void (*operator_delete_aligned_nothrow_fn)(void *, size_t, const void *);
typedef void (*operator_delete_sized_aligned_fn)(void *, size_t, size_t);

static inline __attribute__((always_inline)) void call_operator_delete(enum operator_form form, void *next,
                                                                        void *pointer, size_t size, size_t alignment,
                                                                        const void *nothrow)
{
    switch (form) {
    case OPERATOR_DELETE_NOTHROW:
    case OPERATOR_DELETE_ARRAY_NOTHROW:
        ((operator_delete_nothrow_fn)next)(pointer, nothrow);
        return;
    case OPERATOR_DELETE_SIZED:
    case OPERATOR_DELETE_ARRAY_SIZED:
        ((operator_delete_sized_fn)next)(pointer, size);
        return;
    case OPERATOR_DELETE_ALIGNED:
    case OPERATOR_DELETE_ARRAY_ALIGNED:
        ((operator_delete_sized_fn)next)(pointer, alignment);
        return;
    case OPERATOR_DELETE_ALIGNED_NOTHROW:
    case OPERATOR_DELETE_ARRAY_ALIGNED_NOTHROW:
        ((operator_delete_aligned_nothrow_fn)next)(pointer, alignment, nothrow);
        return;
    case OPERATOR_DELETE_SIZED_ALIGNED:
    case OPERATOR_DELETE_ARRAY_SIZED_ALIGNED:
        ((operator_delete_sized_aligned_fn)next)(pointer, size, alignment);
        return;
    default:
        ((operator_delete_fn)next)(pointer);
        return;
    }
}

/* A delete of NULL is nothing, as free(NULL). */
static inline __attribute__((always_inline)) void operator_delete(enum operator_form form, void *pointer,
                                                                   size_t size, size_t alignment, const void *nothrow)
{
    const void *caller = __builtin_return_address(0);
    void *next = next_operator(form);
    struct shim_thread *thread = &this_thread;
    if (pointer && should_record(thread) && !operator_nested_call(caller))
        record_free_before(thread, pointer); /* before the real delete: see shm_event */
    thread->guard++;
    call_operator_delete(form, next, pointer, size, alignment, nothrow);
    thread->guard--;
}

/* ---- the interposers ------------------------------------------------------ */

SHIM_EXPORT void *malloc(size_t size)
{
    if (UNLIKELY(!real_ready()))
        return bootstrap_alloc(size, 16);
    void *pointer = real.malloc(size);
    if (LIKELY(pointer != NULL) && should_record(&this_thread) && !operator_nested_call(__builtin_return_address(0)))
        record_alloc(pointer, size, SHM_FN_MALLOC);
    return pointer;
}

SHIM_EXPORT void free(void *pointer)
{
    if (!pointer || UNLIKELY(is_bootstrap(pointer)))
        return;
    if (UNLIKELY(!real_ready()))
        return; /* cannot happen: a non-bootstrap block came from `real` */
    if (should_record(&this_thread) && !operator_nested_call(__builtin_return_address(0)))
        record_free_before(&this_thread, pointer); /* before the real free: see shm_event */
    real.free(pointer);
}

SHIM_EXPORT void *calloc(size_t count, size_t size)
{
    if (UNLIKELY(!real_ready())) {
        size_t bytes;
        if (__builtin_mul_overflow(count, size, &bytes)) {
            errno = ENOMEM;
            return NULL;
        }
        return bootstrap_alloc(bytes, 16);
    }
    void *pointer = real.calloc(count, size);
    if (LIKELY(pointer != NULL) && should_record(&this_thread) && !operator_nested_call(__builtin_return_address(0)))
        record_alloc(pointer, count * size, SHM_FN_CALLOC);
    return pointer;
}

/* realloc of a bootstrap block (dlsym's, in practice): moved to the real
 * heap unrecorded, like the block itself. */
static void *realloc_bootstrap(void *old, size_t size)
{
    void *moved = real_ready() ? real.malloc(size) : bootstrap_alloc(size, 16);
    if (moved) {
        size_t old_size = bootstrap_size(old);
        memcpy(moved, old, old_size < size ? old_size : size);
    }
    return moved;
}

/* What a realloc knows of its old block before the real call: where the
 * held sets had it, and its free's stamp. */
struct realloc_old {
    struct held_found held;
    struct stamp free_time;
};

/* Before the real call: the old block is taken out of the held sets first
 * (after the call, another thread may already hold a new block at that
 * address, and a push-out stamped after this free's stamp would not be
 * cancelled by it), then the free's stamp is read. */
static inline struct realloc_old realloc_old_before(struct shim_thread *thread, bool recording, void *old)
{
    struct realloc_old before = {{HELD_NOT, 0}, {0, 0}};
    if (!recording || !old)
        return before;
    if (ensure_slot(thread))
        before.held = take_held(thread, old);
    before.free_time = event_stamp(thread);
    return before;
}

/* The old block of a realloc is gone (moved, or freed by realloc(p, 0)). */
static void record_realloc_free(struct shim_thread *thread, void *old, struct realloc_old before)
{
    if (before.held.take != HELD_NOT)
        settle_held_free(thread, old, before.held, before.free_time);
    else if (ensure_slot(thread))
        put_event(thread, before.free_time, (uint64_t)(uintptr_t)old, 0, SHM_STACK_NONE, SHM_EV_FREE, 0);
}

/* Shared by the reallocs once the real call returned `moved`. */
static inline void record_realloc(void *old, void *moved, size_t size, struct realloc_old before,
                                  enum shm_alloc_fn fn)
{
    struct shim_thread *thread = &this_thread;
    if (moved) {
        if (old)
            record_realloc_free(thread, old, before);
        record_alloc(moved, size, fn);
    } else if (old && size == 0) {
        record_realloc_free(thread, old, before); /* glibc: realloc(p, 0) frees p, returns NULL */
    } else if (before.held.take != HELD_NOT) {
        /* it failed, the old block lives on, out of the set it was taken
         * from: it crosses as a held block would, as one the tracer may
         * have taken from the set already if the take was HELD_UNSETTLED */
        uint16_t kept = before.held.take == HELD_UNSETTLED ? SHM_EVENT_HELD_KEPT : 0;
        sending_held(thread, 1);
        send_held(thread, &(struct held_block){(uint64_t)(uintptr_t)old, before.held.size, read_clock()}, kept);
        sending_held(thread, 0);
    }
    /* else it failed and the old block is untouched: nothing happened */
}

SHIM_EXPORT void *realloc(void *old, size_t size)
{
    if (UNLIKELY(old != NULL && is_bootstrap(old)))
        return realloc_bootstrap(old, size);
    if (UNLIKELY(!real_ready()))
        return bootstrap_alloc(size, 16);
    struct shim_thread *thread = &this_thread;
    bool recording = should_record(thread) && !operator_nested_call(__builtin_return_address(0));
    struct realloc_old before = realloc_old_before(thread, recording, old);
    void *moved = real.realloc(old, size);
    if (recording)
        record_realloc(old, moved, size, before, SHM_FN_REALLOC);
    return moved;
}

SHIM_EXPORT void *reallocarray(void *old, size_t count, size_t size)
{
    size_t bytes;
    if (__builtin_mul_overflow(count, size, &bytes)) {
        errno = ENOMEM;
        return NULL;
    }
    if (UNLIKELY(old != NULL && is_bootstrap(old)))
        return realloc_bootstrap(old, bytes);
    if (UNLIKELY(!real_ready()))
        return bootstrap_alloc(bytes, 16);
    struct shim_thread *thread = &this_thread;
    bool recording = should_record(thread) && !operator_nested_call(__builtin_return_address(0));
    struct realloc_old before = realloc_old_before(thread, recording, old);
    /* Not real.reallocarray: glibc's calls realloc through the PLT, that is
     * us, and the block would be counted twice. */
    void *moved = real.realloc(old, bytes);
    if (recording)
        record_realloc(old, moved, bytes, before, SHM_FN_REALLOCARRAY);
    return moved;
}

SHIM_EXPORT int posix_memalign(void **out, size_t alignment, size_t size)
{
    if (UNLIKELY(!real_ready())) {
        void *pointer = bootstrap_alloc(size, alignment);
        if (!pointer)
            return ENOMEM;
        *out = pointer;
        return 0;
    }
    int rc = real.posix_memalign(out, alignment, size);
    if (rc == 0 && should_record(&this_thread) && !operator_nested_call(__builtin_return_address(0)))
        record_alloc(*out, size, SHM_FN_POSIX_MEMALIGN);
    return rc;
}

SHIM_EXPORT void *aligned_alloc(size_t alignment, size_t size)
{
    if (UNLIKELY(!real_ready()))
        return bootstrap_alloc(size, alignment);
    void *pointer = real.aligned_alloc(alignment, size);
    if (LIKELY(pointer != NULL) && should_record(&this_thread) && !operator_nested_call(__builtin_return_address(0)))
        record_alloc(pointer, size, SHM_FN_ALIGNED_ALLOC);
    return pointer;
}

SHIM_EXPORT void *memalign(size_t alignment, size_t size)
{
    if (UNLIKELY(!real_ready()))
        return bootstrap_alloc(size, alignment);
    void *pointer = real.memalign(alignment, size);
    if (LIKELY(pointer != NULL) && should_record(&this_thread) && !operator_nested_call(__builtin_return_address(0)))
        record_alloc(pointer, size, SHM_FN_MEMALIGN);
    return pointer;
}

SHIM_EXPORT void *valloc(size_t size)
{
    if (UNLIKELY(!real_ready()))
        return bootstrap_alloc(size, 4096);
    void *pointer = real.valloc(size);
    if (LIKELY(pointer != NULL) && should_record(&this_thread) && !operator_nested_call(__builtin_return_address(0)))
        record_alloc(pointer, size, SHM_FN_VALLOC);
    return pointer;
}

SHIM_EXPORT void *pvalloc(size_t size)
{
    if (UNLIKELY(!real_ready()))
        return bootstrap_alloc(size, 4096);
    void *pointer = real.pvalloc(size);
    if (LIKELY(pointer != NULL) && should_record(&this_thread) && !operator_nested_call(__builtin_return_address(0)))
        record_alloc(pointer, size, SHM_FN_PVALLOC);
    return pointer;
}

/* ---- the C++ operators, exported ------------------------------------------- */

/* The exported operators, under their mangled names. */
#define SHIM_OPERATOR(name, symbol) SHIM_EXPORT __typeof__(name) name __asm__(symbol)

void *shim_new(size_t size);
void *shim_new_array(size_t size);
void *shim_new_nothrow(size_t size, const void *nothrow);
void *shim_new_array_nothrow(size_t size, const void *nothrow);
void *shim_new_aligned(size_t size, size_t alignment);
void *shim_new_array_aligned(size_t size, size_t alignment);
void *shim_new_aligned_nothrow(size_t size, size_t alignment, const void *nothrow);
void *shim_new_array_aligned_nothrow(size_t size, size_t alignment, const void *nothrow);
void shim_delete(void *pointer);
void shim_delete_array(void *pointer);
void shim_delete_nothrow(void *pointer, const void *nothrow);
void shim_delete_array_nothrow(void *pointer, const void *nothrow);
void shim_delete_sized(void *pointer, size_t size);
void shim_delete_array_sized(void *pointer, size_t size);
void shim_delete_aligned(void *pointer, size_t alignment);
void shim_delete_array_aligned(void *pointer, size_t alignment);
void shim_delete_aligned_nothrow(void *pointer, size_t alignment, const void *nothrow);
void shim_delete_array_aligned_nothrow(void *pointer, size_t alignment, const void *nothrow);
void shim_delete_sized_aligned(void *pointer, size_t size, size_t alignment);
void shim_delete_array_sized_aligned(void *pointer, size_t size, size_t alignment);

SHIM_OPERATOR(shim_new, "_Znw" MANGLED_SIZE);
SHIM_OPERATOR(shim_new_array, "_Zna" MANGLED_SIZE);
SHIM_OPERATOR(shim_new_nothrow, "_Znw" MANGLED_SIZE MANGLED_NOTHROW);
SHIM_OPERATOR(shim_new_array_nothrow, "_Zna" MANGLED_SIZE MANGLED_NOTHROW);
SHIM_OPERATOR(shim_new_aligned, "_Znw" MANGLED_SIZE MANGLED_ALIGN);
SHIM_OPERATOR(shim_new_array_aligned, "_Zna" MANGLED_SIZE MANGLED_ALIGN);
SHIM_OPERATOR(shim_new_aligned_nothrow, "_Znw" MANGLED_SIZE MANGLED_ALIGN MANGLED_NOTHROW);
SHIM_OPERATOR(shim_new_array_aligned_nothrow, "_Zna" MANGLED_SIZE MANGLED_ALIGN MANGLED_NOTHROW);
SHIM_OPERATOR(shim_delete, "_ZdlPv");
SHIM_OPERATOR(shim_delete_array, "_ZdaPv");
SHIM_OPERATOR(shim_delete_nothrow, "_ZdlPv" MANGLED_NOTHROW);
SHIM_OPERATOR(shim_delete_array_nothrow, "_ZdaPv" MANGLED_NOTHROW);
SHIM_OPERATOR(shim_delete_sized, "_ZdlPv" MANGLED_SIZE);
SHIM_OPERATOR(shim_delete_array_sized, "_ZdaPv" MANGLED_SIZE);
SHIM_OPERATOR(shim_delete_aligned, "_ZdlPv" MANGLED_ALIGN);
SHIM_OPERATOR(shim_delete_array_aligned, "_ZdaPv" MANGLED_ALIGN);
SHIM_OPERATOR(shim_delete_aligned_nothrow, "_ZdlPv" MANGLED_ALIGN MANGLED_NOTHROW);
SHIM_OPERATOR(shim_delete_array_aligned_nothrow, "_ZdaPv" MANGLED_ALIGN MANGLED_NOTHROW);
SHIM_OPERATOR(shim_delete_sized_aligned, "_ZdlPv" MANGLED_SIZE MANGLED_ALIGN);
SHIM_OPERATOR(shim_delete_array_sized_aligned, "_ZdaPv" MANGLED_SIZE MANGLED_ALIGN);

void *shim_new(size_t size)
{
    return operator_new(OPERATOR_NEW, size, 0, NULL);
}

void *shim_new_array(size_t size)
{
    return operator_new(OPERATOR_NEW_ARRAY, size, 0, NULL);
}

void *shim_new_nothrow(size_t size, const void *nothrow)
{
    return operator_new(OPERATOR_NEW_NOTHROW, size, 0, nothrow);
}

void *shim_new_array_nothrow(size_t size, const void *nothrow)
{
    return operator_new(OPERATOR_NEW_ARRAY_NOTHROW, size, 0, nothrow);
}

void *shim_new_aligned(size_t size, size_t alignment)
{
    return operator_new(OPERATOR_NEW_ALIGNED, size, alignment, NULL);
}

void *shim_new_array_aligned(size_t size, size_t alignment)
{
    return operator_new(OPERATOR_NEW_ARRAY_ALIGNED, size, alignment, NULL);
}

void *shim_new_aligned_nothrow(size_t size, size_t alignment, const void *nothrow)
{
    return operator_new(OPERATOR_NEW_ALIGNED_NOTHROW, size, alignment, nothrow);
}

void *shim_new_array_aligned_nothrow(size_t size, size_t alignment, const void *nothrow)
{
    return operator_new(OPERATOR_NEW_ARRAY_ALIGNED_NOTHROW, size, alignment, nothrow);
}

void shim_delete(void *pointer)
{
    operator_delete(OPERATOR_DELETE, pointer, 0, 0, NULL);
}

void shim_delete_array(void *pointer)
{
    operator_delete(OPERATOR_DELETE_ARRAY, pointer, 0, 0, NULL);
}

void shim_delete_nothrow(void *pointer, const void *nothrow)
{
    operator_delete(OPERATOR_DELETE_NOTHROW, pointer, 0, 0, nothrow);
}

void shim_delete_array_nothrow(void *pointer, const void *nothrow)
{
    operator_delete(OPERATOR_DELETE_ARRAY_NOTHROW, pointer, 0, 0, nothrow);
}

void shim_delete_sized(void *pointer, size_t size)
{
    operator_delete(OPERATOR_DELETE_SIZED, pointer, size, 0, NULL);
}

void shim_delete_array_sized(void *pointer, size_t size)
{
    operator_delete(OPERATOR_DELETE_ARRAY_SIZED, pointer, size, 0, NULL);
}

void shim_delete_aligned(void *pointer, size_t alignment)
{
    operator_delete(OPERATOR_DELETE_ALIGNED, pointer, 0, alignment, NULL);
}

void shim_delete_array_aligned(void *pointer, size_t alignment)
{
    operator_delete(OPERATOR_DELETE_ARRAY_ALIGNED, pointer, 0, alignment, NULL);
}

void shim_delete_aligned_nothrow(void *pointer, size_t alignment, const void *nothrow)
{
    operator_delete(OPERATOR_DELETE_ALIGNED_NOTHROW, pointer, 0, alignment, nothrow);
}

void shim_delete_array_aligned_nothrow(void *pointer, size_t alignment, const void *nothrow)
{
    operator_delete(OPERATOR_DELETE_ARRAY_ALIGNED_NOTHROW, pointer, 0, alignment, nothrow);
}

void shim_delete_sized_aligned(void *pointer, size_t size, size_t alignment)
{
    operator_delete(OPERATOR_DELETE_SIZED_ALIGNED, pointer, size, alignment, NULL);
}

void shim_delete_array_sized_aligned(void *pointer, size_t size, size_t alignment)
{
    operator_delete(OPERATOR_DELETE_ARRAY_SIZED_ALIGNED, pointer, size, alignment, NULL);
}

/* ---- CPython's allocator domains ------------------------------------------- */

/* The MEM and OBJ domains' wrappers (python_runtime.h): pymalloc keeps
 * serving the objects, and each is recorded as the interposers record a
 * malloc. The guard is raised around the wrapped allocator, whose own
 * calls to malloc (large objects, arenas' bookkeeping) are part of the
 * object being recorded; a signal handler that allocates in that window
 * goes unrecorded (the window is pymalloc's own code, a few instructions
 * for a small object). */
static void *python_hook_malloc(void *ctx, size_t size);
static void *python_hook_calloc(void *ctx, size_t count, size_t size);
static void *python_hook_realloc(void *ctx, void *old, size_t size);
static void python_hook_free(void *ctx, void *pointer);

#define PYTHON_WRAPPER {NULL, python_hook_malloc, python_hook_calloc, python_hook_realloc, python_hook_free}
static struct python_domain python_mem_domain = {.wrapper = PYTHON_WRAPPER, .alloc_fn = SHM_FN_PYMEM};
static struct python_domain python_object_domain = {.wrapper = PYTHON_WRAPPER, .alloc_fn = SHM_FN_PYOBJECT};

static inline void python_after_allocation(const struct python_domain *domain)
{
    if (UNLIKELY(python_profile_wanted) && domain == &python_object_domain)
        python_install_profile();
}

static void *python_hook_malloc(void *ctx, size_t size)
{
    struct python_domain *domain = ctx;
    struct shim_thread *thread = &this_thread;
    thread->guard++;
    void *pointer = domain->inner.malloc(domain->inner.ctx, size);
    thread->guard--;
    if (LIKELY(pointer != NULL) && should_record(thread))
        record_alloc(pointer, size, (enum shm_alloc_fn)domain->alloc_fn);
    python_after_allocation(domain);
    return pointer;
}

static void *python_hook_calloc(void *ctx, size_t count, size_t size)
{
    struct python_domain *domain = ctx;
    struct shim_thread *thread = &this_thread;
    thread->guard++;
    void *pointer = domain->inner.calloc(domain->inner.ctx, count, size);
    thread->guard--;
    if (LIKELY(pointer != NULL) && should_record(thread))
        record_alloc(pointer, count * size, (enum shm_alloc_fn)domain->alloc_fn);
    python_after_allocation(domain);
    return pointer;
}

static void *python_hook_realloc(void *ctx, void *old, size_t size)
{
    struct python_domain *domain = ctx;
    struct shim_thread *thread = &this_thread;
    bool recording = should_record(thread);
    struct realloc_old before = realloc_old_before(thread, recording, old);
    thread->guard++;
    void *moved = domain->inner.realloc(domain->inner.ctx, old, size);
    thread->guard--;
    if (recording)
        record_realloc(old, moved, size, before, (enum shm_alloc_fn)domain->alloc_fn);
    return moved;
}

static void python_hook_free(void *ctx, void *pointer)
{
    struct python_domain *domain = ctx;
    struct shim_thread *thread = &this_thread;
    if (pointer && should_record(thread))
        record_free_before(thread, pointer); /* before the real free: see shm_event */
    thread->guard++;
    domain->inner.free(domain->inner.ctx, pointer);
    thread->guard--;
}

/* ---- the marker API ------------------------------------------------------- */

/* include/memslope.h declares these weak, for programs to run without the
 * shim; declared here as the shim defines them. */
void memslope_case_begin(const char *name);
void memslope_iteration(void);
void memslope_case_end(void);

/* noinline and with a body each: the tracer plants breakpoints on them. */
SHIM_EXPORT __attribute__((noinline)) void memslope_case_begin(const char *name)
{
    struct shim_thread *thread = &this_thread;
    if (!should_record(thread))
        return;
    if (!name)
        name = "";
    size_t length = strlen(name);
    uint64_t offset = 0, stored_length = 0;
    struct shm_header *header = region;
    /* Once the pool is full, stop counting: the counter must never wrap
     * back into the pool, over names that earlier events point at. */
    if (length < SHM_NAME_POOL_BYTES &&
        __atomic_load_n(&header->name_pool_used, __ATOMIC_RELAXED) < SHM_NAME_POOL_BYTES) {
        uint32_t start = __atomic_fetch_add(&header->name_pool_used, (uint32_t)length + 1, __ATOMIC_RELAXED);
        if ((uint64_t)start + length + 1 <= SHM_NAME_POOL_BYTES) {
            char *pool = shm_name_pool(region);
            memcpy(pool + start, name, length);
            pool[start + length] = '\0';
            offset = start;
            stored_length = length;
        }
    }
    /* Pool full: an empty name (offset 0, length 0); the event's release
     * publish orders the copied name before the event either way. */
    record_marker(SHM_EV_CASE_BEGIN, offset, stored_length);
}

SHIM_EXPORT __attribute__((noinline)) void memslope_iteration(void)
{
    record_marker(SHM_EV_ITERATION, 0, 0);
}

SHIM_EXPORT __attribute__((noinline)) void memslope_case_end(void)
{
    record_marker(SHM_EV_CASE_END, 0, 0);
}

static void mark_python_iteration(void)
{
    record_marker(SHM_EV_ITERATION, 0, 0);
}

/* A CPython in the image (python_runtime.h): from the constructor, after
 * every library the program was linked with is loaded and before the
 * interpreter initialises, the one moment its allocator domains can be
 * wrapped before any object exists. */
static void start_python(void)
{
    struct shim_thread *thread = &this_thread;
    if (__atomic_load_n(&record_state, __ATOMIC_ACQUIRE) != RECORD_ON)
        return;
    static const struct python_runtime_hooks hooks = {.mem = &python_mem_domain,
                                                      .object = &python_object_domain,
                                                      .mark_iteration = mark_python_iteration,
                                                      .case_begin = memslope_case_begin,
                                                      .iteration = memslope_iteration,
                                                      .case_end = memslope_case_end};
    guard_begin(thread); /* dlsym and the interpreter's registration calls may allocate */
    python_runtime_start(region, &hooks);
    discard_dl_error(); /* its lookups of the interpreter's symbols fail in any other program */
    guard_end(thread);
}

/* ---- _Fork ------------------------------------------------------------------ */

/* glibc's _Fork (2.34) is fork without the fork handlers: its child kept
 * its parent's region and wrote its parent's ring slot (the tracer cannot
 * tell it from fork's child: the clone flags are the same). The child
 * starts its own region here, as fork's handler does; glibc's fork calls
 * its internal _Fork, not this one, so that handler runs once. */
SHIM_EXPORT pid_t _Fork(void)
{
    static pid_t (*next_fork)(void);
    pid_t (*found)(void) = __atomic_load_n(&next_fork, __ATOMIC_ACQUIRE);
    if (!found) {
        struct shim_thread *thread = &this_thread;
        guard_begin(thread); /* dlsym may allocate */
        *(void **)&found = next_symbol("_Fork");
        guard_end(thread);
        if (!found) {
            errno = ENOSYS;
            return -1;
        }
        __atomic_store_n(&next_fork, found, __ATOMIC_RELEASE);
    }
    pid_t pid = found();
    if (pid == 0)
        fork_child();
    return pid;
}

/* ---- _exit ------------------------------------------------------------------ */

/* A program that leaves by _exit (or _Exit) skips exit()'s handlers: the
 * end of the image runs here instead, as memcheck runs freeres at any
 * exit_group. Safe in a vfork child and in a signal handler: freeres runs
 * in neither, and the exit check is system calls only. */
SHIM_EXPORT __attribute__((noreturn)) void _exit(int status)
{
    end_of_image();
    shm_exit_group(status);
}

SHIM_EXPORT __attribute__((noreturn)) void _Exit(int status)
{
    end_of_image();
    shm_exit_group(status);
}
