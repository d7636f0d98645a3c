/*
 * shm_layout.h - the shared-memory ABI between the shim (libmemslope.so,
 * producer) and the tracer (memslope record, consumer).
 *
 * Each process image that loads the shim while traced creates one memfd named
 * "memslope" (MFD_CLOEXEC), sized SHM_TOTAL_SIZE and mapped MAP_SHARED. The
 * tracer finds it through /proc/PID/fd and maps it too. The file is sparse:
 * only the pages a process touches cost memory.
 *
 * Why the shim creates it and not the tracer: every fork child and every exec
 * needs a fresh, empty region (addresses and stack ids are per address space),
 * and a descriptor that survives exec would leak into programs that were not
 * meant to be traced. See docs/trace-format.md, "shared memory".
 *
 * Layout (offsets from the start of the mapping):
 *
 *   [0, SHM_HEADER_SIZE)          struct shm_header
 *   thread slots                  SHM_MAX_THREADS x struct shm_thread_slot,
 *                                 each followed by its ring of events
 *   stack index                   SHM_STACK_INDEX_SLOTS x uint32_t stack ids (hash order)
 *   stack table                   SHM_STACK_TABLE_ENTRIES x struct shm_stack_entry,
 *                                 by stack id, filled in order of first use
 *   frame pool                    SHM_FRAME_POOL_FRAMES x uint64_t
 *   name pool                     SHM_NAME_POOL_BYTES bytes of case names
 *   Python code table             SHM_PYTHON_CODE_ENTRIES x struct shm_python_code
 *   Python text pool              SHM_PYTHON_TEXT_BYTES bytes: code objects' names,
 *                                 file names and line tables
 *   allocator ranges              SHM_ALLOCATOR_RANGES x struct shm_allocator_range
 *   unwind modules                SHM_UNWIND_MODULES x struct shm_unwind_module
 *   unwind rules                  SHM_UNWIND_RULES x struct shm_unwind_rule
 *
 * Concurrency: every ring has exactly one producer (the thread that owns the
 * slot) and one consumer (the tracer). Stack entries are inserted lock-free by
 * any thread; an entry is published (state READY, release) before any event
 * naming its id is committed, so the tracer always sees complete stacks.
 */
#ifndef MEMSLOPE_SHM_LAYOUT_H
#define MEMSLOPE_SHM_LAYOUT_H

#include <signal.h>
#include <stdint.h>

#define SHM_MAGIC 0x4d454d534c4f5045ull /* "MEMSLOPE" */
#define SHM_VERSION 13u
#define SHM_MEMFD_NAME "memslope"

/* Environment the tracer passes to the target. */
#define SHM_ENV_TRACER_PID "MEMSLOPE_TRACER_PID" /* decimal pid; shim records only when set */
#define SHM_ENV_MAX_FRAMES "MEMSLOPE_MAX_FRAMES" /* default SHM_DEFAULT_MAX_FRAMES */
#define SHM_ENV_SAMPLE_RATE "MEMSLOPE_SAMPLE_RATE" /* bytes; 0 = backtrace every allocation */
#define SHM_ENV_NO_FOLLOW "MEMSLOPE_NO_FOLLOW"   /* "1": fork children do not record */
#define SHM_ENV_NO_FREERES "MEMSLOPE_NO_FREERES" /* "1": --no-freeres, glibc's and libstdc++'s freeres not run at exit */
#define SHM_ENV_CLOCK "MEMSLOPE_CLOCK"           /* "tsc": stamp events with the TSC (the tracer checked it
                                                    reads in step on every processor; tsc_check.h);
                                                    otherwise CLOCK_MONOTONIC */
#define SHM_ENV_NO_PTRACE "MEMSLOPE_NO_PTRACE"   /* "1": record without being traced (no-ptrace mode) */
#define SHM_ENV_TARGET_PID "MEMSLOPE_TARGET_PID" /* no-ptrace mode: only this process (and what it execs) records */
#define SHM_ENV_SOCKET "MEMSLOPE_SOCKET"         /* no-ptrace mode: a unix socket on which the shim sends
                                                    its region's memfd (SCM_RIGHTS) as soon as it exists:
                                                    the tracer has it even if the process ends at once */
#define SHM_ENV_PY_ITERATION "MEMSLOPE_PY_ITERATION" /* --iteration py:[MODULE:]QUALNAME: every call of that
                                                        Python function is an iteration marker */
#define SHM_ENV_HOLD "MEMSLOPE_HOLD"             /* "1": with --sample-rate, a thread may keep its unsampled
                                                    blocks in a set of its own (struct shm_held_bucket)
                                                    while no case is open; the tracer reads the sets at
                                                    every stop of the world */
#define SHM_ENV_UNWIND_RULES "MEMSLOPE_UNWIND_RULES" /* the symbol cache's folder: the shim reads the unwind
                                                        rules kept there and reports those it looks up
                                                        (struct shm_unwind_module) */

#define SHM_DEFAULT_MAX_FRAMES 64u
#define SHM_MAX_FRAMES_LIMIT 256u

#define SHM_MAX_THREADS 1024u
#define SHM_RING_EVENTS 32768u /* power of two; 1 MiB of events per thread */
/* Stacks are numbered in order of first use (ids 1, 2, ...) and found by
 * hash through the index, which holds only ids: 16 MiB of slots instead of
 * 16-byte entries touched at random (64 MiB). Each page of the file a
 * process touches costs a fault and a zeroed page; a stack probes the
 * index's first 256 KiB before the rest (preload/near_probe.h), so the
 * ~10,000 stacks of a Python start-up touch 64 of its pages, not all 4,096.
 * Ids stop below three quarters of the index's slots (3,145,727 stacks,
 * less the ids a lost race or a full frame pool used up); a long probe
 * cluster (STACK_TABLE_MAX_PROBES) may drop a stack before that.
 *
 * Sized for a Python program that runs much distinct code: every distinct
 * Python line on the way to an allocation is a stack of its own, and
 * `python3 -m pydoc -k xml` (which imports every installed module) makes
 * ~690,000 stacks of ~44 frames, 18 M frames in the pool: a quarter of
 * these. Only what is used is touched: the file is sparse, and a C
 * program's few thousand stacks cost what they did with tables a quarter
 * the size. */
#define SHM_STACK_INDEX_SLOTS (1u << 22) /* power of two */
#define SHM_STACK_TABLE_ENTRIES (3u << 20) /* stack ids are below this */
#define SHM_FRAME_POOL_FRAMES (1u << 26)
/* name pool: see SHM_NAME_POOL_BYTES below */

/* Stack id 0 is reserved: "no backtrace" (the table or pool was full, or the
 * allocation was not sampled). Real ids are table indexes >= 1. */
#define SHM_STACK_NONE 0u

enum shm_event_kind {
    SHM_EV_ALLOC = 1,   /* addr, size, stack_id */
    SHM_EV_FREE = 2,    /* addr */
    SHM_EV_CASE_BEGIN = 3, /* addr = offset of the name in the name pool, size = its length (no NUL) */
    SHM_EV_ITERATION = 4,
    SHM_EV_CASE_END = 5,
};

/* Entry point that allocated a block: lets the report tell malloc from new. */
enum shm_alloc_fn {
    SHM_FN_MALLOC = 0, SHM_FN_CALLOC, SHM_FN_REALLOC, SHM_FN_REALLOCARRAY,
    SHM_FN_POSIX_MEMALIGN, SHM_FN_ALIGNED_ALLOC, SHM_FN_MEMALIGN, SHM_FN_VALLOC,
    SHM_FN_PVALLOC,
    SHM_FN_PYMEM,    /* CPython's PyMem_Malloc family (the MEM domain, hooked) */
    SHM_FN_PYOBJECT, /* CPython's PyObject_Malloc family (the OBJ domain, hooked) */
    SHM_FN_OPERATOR_NEW,               /* C++ operator new (plain or nothrow) */
    SHM_FN_OPERATOR_NEW_ARRAY,         /* operator new[] */
    SHM_FN_OPERATOR_NEW_ALIGNED,       /* operator new with std::align_val_t */
    SHM_FN_OPERATOR_NEW_ARRAY_ALIGNED, /* operator new[] with std::align_val_t */
};

/* 32 bytes. time_ns is CLOCK_MONOTONIC nanoseconds, or TSC ticks (see
 * shm_header.clock_source): a free is stamped before the real free, an
 * allocation after the real allocator returns, so the allocator's own
 * locking orders the two stamps of a reused address, up to the few
 * instructions an unfenced TSC read may move (the tracer resolves what
 * that can reorder). While the process has one producer, most events
 * repeat the previous stamp instead (the shim's event_stamp, flagged
 * SHM_EVENT_STAMP_REPEATED); the tracer never places such an event before
 * it last looked at the event's ring. */
struct shm_event {
    uint64_t time_ns;
    uint64_t addr;
    uint64_t size;
    uint32_t stack_id;
    uint8_t kind;     /* enum shm_event_kind */
    uint8_t alloc_fn; /* enum shm_alloc_fn, for SHM_EV_ALLOC */
    uint16_t flags;   /* SHM_EVENT_* */
};

/* time_ns repeats the thread's previous stamp (see the shim's event_stamp)
 * instead of reading the clock: the tracer may place the event later, at
 * the time it last looked at the ring, never earlier. Exact stamps are taken as they are:
 * one published late (its thread preempted between stamp and publish) is
 * exactly what the recorder's pending frees account for. */
#define SHM_EVENT_STAMP_REPEATED 1u
/* An allocation that was held in its thread's set (struct shm_held_bucket)
 * and crosses later (pushed out of the set, or the thread ends): time_ns is
 * when it left the set (see "The held set"), and it was made while no case
 * was open. On a free (size set): the thread held the block, and the
 * tracer may have taken it from the set meanwhile; if the tracer has no
 * such block, the pair counts as one that never crossed. */
#define SHM_EVENT_HELD 2u
/* With SHM_EVENT_HELD on an allocation: a block a failed realloc keeps,
 * taken out of its set while the tracer took the set (HELD_UNSETTLED): live
 * unless the tracer has it already. */
#define SHM_EVENT_HELD_KEPT 4u

/*
 * The held set: with --sample-rate (and SHM_ENV_HOLD), each recording thread
 * keeps the allocations it did not sample in a set of its own, in its own
 * anonymous memory (SHM_HELD_BUCKETS buckets, the address in its slot's
 * held_table), and a free that finds its block there, or in another
 * thread's set, sends nothing: the pair is counted in the freeing thread's
 * slot (held_pairs, held_pair_bytes). Only while no case is open
 * (shm_header.case_state), two or more threads record, and the tracer asks
 * (shm_header.hold_wanted: the image allocates fast).
 *
 * A block is in the set while its address is in addr[way]; its size is
 * written before the address (release). A held block has no stamp: it
 * gets one when it leaves the set, read before the compare-and-swap that
 * takes it out (so before any other thread can miss it there and send its
 * free), or the time of the stop at which the tracer takes it. The tracer
 * takes blocks out only while no thread of the image can run, bumping the
 * slot's held_epoch first.
 * The thread clears a way by its free (a plain store, then the epoch read
 * again: changed, the free crosses flagged SHM_EVENT_HELD) or pushes a
 * block out by a compare-and-swap (then it crosses flagged SHM_EVENT_HELD);
 * another thread that frees the block takes it by compare-and-swap too (a
 * stale copy left in its owner's set would make a later free of another
 * block at that address, by the owner, look like its own pair).
 * So a thread stopped at any instruction leaves a set the tracer can read,
 * and a block is counted once. See docs/internals.md, "The held set".
 */
#define SHM_HELD_WAYS 5u
#define SHM_HELD_BUCKET_BITS 12u
#define SHM_HELD_BUCKETS (1u << SHM_HELD_BUCKET_BITS)
/* Larger blocks always cross: what the set holds is invisible to the
 * timeline and the peak between two drains of the tracer. */
#define SHM_HELD_MAX_SIZE 65536u

/* Events a second (allocations and frees, held pairs counted) over which
 * the tracer asks the threads to hold, and under which it stops asking. */
#define SHM_HOLD_ON_RATE 3000000u
#define SHM_HOLD_OFF_RATE 1500000u
/* The same while the image has a recording thread on every processor: then
 * the tracer's time is taken from one of them, and holding paid at lower
 * rates (malloc_bench -t 2 at 2.9 M events a second: paired wall 1.119 of
 * plain sending every block, 1.073 holding; at 0.63 M: 1.049 and 1.040). */
#define SHM_HOLD_CROWDED_ON_RATE 1000000u
#define SHM_HOLD_CROWDED_OFF_RATE 500000u

/* One cache line: a free or an insert touches one line of the set (with
 * four ways and 64-bit sizes a bucket took two or three, and the set cost
 * the program 10 ns more an event). Five ways, not three with a stamp
 * each: reading the TSC for every held block cost 12.6 ns, and with three
 * ways 3.4 % of the blocks were pushed out of full buckets, each then sent
 * and its free looked for in the other threads' sets. */
struct shm_held_bucket {
    _Alignas(64) uint64_t addr[SHM_HELD_WAYS]; /* 0: empty */
    uint32_t size[SHM_HELD_WAYS];               /* at most SHM_HELD_MAX_SIZE */
    uint32_t pad;
};

enum shm_slot_state {
    SHM_SLOT_FREE = 0,    /* may be claimed by a thread (CAS FREE -> OWNED) */
    SHM_SLOT_OWNED = 1,   /* a live thread writes here */
    SHM_SLOT_RETIRED = 2, /* its thread ended; the tracer drains it, then sets FREE */
};

/* One cache line of control, then the ring. Producer-written and
 * consumer-written fields sit on separate cache lines. */
struct shm_thread_slot {
    /* producer side */
    _Alignas(64) uint64_t write_pos; /* events committed (release) */
    uint32_t state;                  /* enum shm_slot_state */
    uint32_t tid;
    uint32_t producer_waiting;       /* 1 while the producer sleeps on read_seq */
    uint32_t held_epoch;             /* bumped by the tracer before it takes the set: only while the
                                        thread is stopped, so it shares the producer's line */
    /* Monotonic, never reset (a new owner carries on): pairs of the held set
     * that never crossed (their bytes), the bytes that went into the set, and
     * those that crossed out of it (pushed out, or at the thread's end). */
    uint64_t held_pairs, held_pair_bytes;
    uint64_t held_in_bytes, held_out_bytes;
    /* Set while the thread sends a block it took out of its set (pushed
     * out, its end): a fork in that instant leaves the block in neither
     * the child's copy of the set nor, until it is published, the ring;
     * the tracer waits for it before it gives the child its heap. */
    uint32_t held_sending;
    uint32_t pad0;
    /* consumer side */
    _Alignas(64) uint64_t read_pos;  /* events consumed (release) */
    uint32_t read_seq;               /* futex word: bumped after every drain */
    uint32_t pad1;
    /* The owner's held set (SHM_HELD_BUCKETS buckets) in its memory, 0:
     * none. Here, not with the producer's fields: other threads read it at
     * every free they cannot settle in their own set, and the producer's
     * line changes at every event. */
    uint64_t held_table;
    _Alignas(64) struct shm_event ring[SHM_RING_EVENTS];
};

enum shm_stack_state { SHM_STACK_EMPTY = 0, SHM_STACK_BUSY = 1, SHM_STACK_READY = 2 };

/* An entry is filled by the thread that took its id (fetch-add of
 * stack_entries_used), published with state READY (release), and only then
 * its id stored in an empty index slot (CAS): whoever finds the id in the
 * index finds the entry complete. Two threads inserting the same new stack
 * at once both fill an entry; the one whose CAS loses finds the other's and
 * leaves its own unused (READY, never named by an event; an id whose frames
 * found the pool full stays EMPTY).
 *
 * A stack's frames are its depth - tail_count innermost ones at
 * frame_offset, then its tail_count outermost ones at tail_offset: a span
 * another stack of the same thread stored before, whose outer frames this
 * one shares (preload/stack_table.h). A Python start-up's 10,000 stacks,
 * ~45 frames each, mostly differ in a few inner ones. */
struct shm_stack_entry {
    uint64_t hash;         /* stack_hash of the frames, never 0 */
    uint32_t frame_offset; /* index into the frame pool: the inner frames */
    uint16_t depth;        /* all of them */
    uint16_t state;        /* enum shm_stack_state, READY stored with release */
    uint32_t tail_offset;  /* index into the frame pool: the outer frames */
    uint32_t tail_count;   /* 0: all depth frames are at frame_offset */
};

struct shm_header {
    uint64_t magic;
    uint32_t version;
    uint32_t header_size;
    uint64_t total_size;
    uint32_t pid;             /* process that created the region */
    uint32_t max_frames;
    uint64_t slots_offset;
    uint64_t slot_size;       /* sizeof(struct shm_thread_slot) */
    uint32_t max_threads;
    uint32_t ring_events;
    uint64_t stack_table_offset;
    uint32_t stack_table_entries;
    uint32_t frame_pool_frames;
    uint64_t stack_index_offset;
    uint32_t stack_index_slots;
    uint32_t stack_entries_used; /* atomic fetch-add by producers; starts at 1 (id 0 is SHM_STACK_NONE) */
    uint64_t frame_pool_offset;
    uint32_t frame_pool_used;   /* atomic fetch-add by producers */
    uint32_t stacks_dropped;    /* allocations recorded with SHM_STACK_NONE because a table was full */
    uint32_t slots_exhausted;   /* threads that found no free slot (their events are lost: reported) */
    /* One past the highest slot ever claimed (atomic max, before the
     * claiming thread writes an event): the tracer looks at slots below it
     * only. Each slot's first page is a page of its own, and reading it
     * faulted in and allocated that page in the tracer: 1,024 pages (4 MiB)
     * for every process image, most of them never used. */
    uint32_t slots_high_water;
    uint32_t ready;             /* set to 1 (release) once the header is complete */
    uint64_t sample_rate;       /* bytes; 0 = every allocation has a backtrace */
    uint64_t name_pool_offset;
    uint32_t name_pool_bytes;
    uint32_t name_pool_used;    /* atomic fetch-add by producers */
    uint32_t clock_source;      /* enum shm_clock_source of every event's time_ns */
    uint32_t pad_clock;
    /* CPython, when the image runs it (see preload/python_runtime.h). */
    uint32_t python_version;    /* PY_VERSION_HEX of the interpreter; 0: none found */
    uint32_t python_mode;       /* enum shm_python_mode */
    uint32_t python_frames;     /* 1: Python frames are read into backtraces */
    uint32_t python_codes_dropped; /* frames left unnamed: the code table or text pool was full */
    uint64_t python_code_offset;
    uint32_t python_code_entries;
    uint32_t python_text_bytes;
    uint64_t python_text_offset;
    uint32_t python_text_used;  /* atomic fetch-add by producers */
    uint32_t pad_python;
    /* Memory allocators own whose every block is recorded (see
     * struct shm_allocator_range). */
    uint64_t allocator_ranges_offset;
    uint32_t allocator_ranges_entries;
    uint32_t allocator_ranges_used;    /* entries ever claimed: the reader looks at [0, used) */
    uint32_t allocator_ranges_dropped; /* ranges not recorded: the table was full */
    uint32_t allocator_ranges_free;    /* entries below used freed since (a hint: 0 skips the search) */
    /* The shim's own static TLS block, at this offset from every thread's
     * thread pointer (x86-64: fs_base), shim_tls_size bytes (0: unknown).
     * Its caches keep addresses the program has freed since (code objects,
     * frame pointers of earlier backtraces): the leak scan leaves it out,
     * as it leaves the shim's .bss out. */
    int64_t shim_tls_offset;
    uint64_t shim_tls_size;
    /* The unwinder's modules and the rules it looked up (struct
     * shm_unwind_module): entries below used are complete (release). */
    uint32_t unwind_modules_used;
    uint32_t unwind_rules_used;
    uint32_t unwind_rules_dropped;   /* looked up, not reported: the log was full */
    uint32_t unwind_rules_reused;    /* read from a module's kept rules (relaxed) */
    uint32_t unwind_rules_looked_up; /* every rule looked up in CFI, in any module */
    uint32_t pad_unwind;
    /* What became of glibc's and libstdc++'s freeres at the image's end
     * (preload/freeres.h), written once by the thread that ended it
     * (release), before the exit_group stop: the report says why figures
     * differ from memcheck's, which always runs them. */
    uint32_t freeres_outcome;       /* enum shm_freeres_outcome */
    uint32_t freeres_other_threads; /* SHM_FREERES_OTHER_THREADS: how many still ran */
    /* Where a copy of this image made by fork's system call without glibc's
     * fork (no fork handler ran: its shim still writes this region) is told
     * to stop recording: the tracer writes the 32-bit stop_recording_value
     * at stop_recording_address in the child's memory, at its first stop. */
    uint64_t stop_recording_address;
    uint32_t stop_recording_value;
    /* Set by a thread whose doorbell (SHM_TRACER_DOORBELL) the kernel
     * refused: the image runs as another user now. The tracer then wakes
     * as often as it did before it had a doorbell. */
    uint32_t doorbell_refused;
    /* Threads that hold a slot (claims minus retirements). Read by every
     * event while it is 1 (see the shim's event_stamp), written only when a
     * thread starts or stops recording: a cache line of its own, shared
     * with the held sets' fields below, which every sampled event reads
     * and markers and new sets rarely write. */
    _Alignas(64) uint32_t producers;
    uint32_t held_sets_made;    /* held sets ever made in this image: at 0 a free looks in no set */
    /* Written by the tracer: 1 while the image's allocations and frees come
     * faster than SHM_HOLD_ON_RATE (then the tracer's work competes with
     * the program's for the processors, and holding pays), 0 once they fall
     * under SHM_HOLD_OFF_RATE (then holding only costs the program). */
    uint32_t hold_wanted;
    uint32_t pad_hold;
    /* The marker API's cases, for the held set: (changes << 1) | open. A
     * case opens (case begin, or an iteration outside a case) before its
     * marker's stamp is read, and closes after its end marker is written;
     * a thread holds a block only if it read an even value before its
     * insert, and sends it back out if the value changed by the insert's
     * end, so every held block was made outside any case. */
    uint64_t case_state;
    /* Written by the tracer: case_state as it was when the tracer last took
     * every set, the world stopped. While a case is open and this equals
     * case_state, every set is empty and frees look in none; between a
     * case's opening and that take they still look (a free that crossed
     * then left its block in a set, and the take counted it live). */
    uint64_t held_taken_state;
};

/*
 * Messages on SHM_ENV_SOCKET (a SOCK_DGRAM unix socket pair; the tracer
 * holds one end, every image of the target the other):
 *
 *   region hand-over  one byte SHM_MESSAGE_REGION, one descriptor: the
 *                     image's memfd (both modes, the moment it exists);
 *   exit check        struct shm_exit_check_request, two descriptors: the
 *                     process's own /proc/self/mem and /proc/self/maps, in
 *                     that order (no-ptrace mode only, at exit or _exit).
 *                     The kernel checks access to those files when they are
 *                     opened, and a process may always open its own, so the
 *                     tracer reads the memory through them where ptrace and
 *                     process_vm_readv are denied. The shim then waits for
 *                     the one-byte reply SHM_EXIT_CHECK_REPLY: the scan runs
 *                     while the exiting thread waits.
 */
#define SHM_MESSAGE_REGION 'r'
#define SHM_EXIT_CHECK_MAGIC 0x4b43484354495845ull /* "EXITCHCK" */
#define SHM_EXIT_CHECK_VERSION 1u
#define SHM_EXIT_CHECK_REGISTERS 6u /* x86-64: rbx, rbp, r12, r13, r14, r15 (callee-saved) */
#define SHM_EXIT_CHECK_FDS 2u       /* /proc/self/mem, /proc/self/maps */
#define SHM_EXIT_CHECK_REPLY 'k'

struct shm_exit_check_request {
    uint64_t magic;          /* SHM_EXIT_CHECK_MAGIC */
    uint32_t version;        /* SHM_EXIT_CHECK_VERSION */
    uint32_t pid;            /* the process (getpid) */
    uint32_t tid;            /* the exiting thread */
    uint32_t register_count; /* valid entries of registers (0 where not captured) */
    uint64_t stack_pointer;  /* the exiting thread's, while it waits for the reply */
    uint64_t registers[SHM_EXIT_CHECK_REGISTERS];
};

/* The tracer's doorbell: it sleeps between drains while the rings are
 * quiet (tracer/session_internal.h, IDLE_WAIT_NS), and this signal ends the
 * sleep; the drain after it looks at every slot. A thread whose ring is
 * full sends it (ring_writer.c) before it waits for room and again at each
 * timeout of that wait (shm_header.doorbell_refused when the kernel will
 * not let it); the region socket's messages ring it through O_ASYNC (with
 * memslope's own credentials); the tracer's symbolizer warm-up rings it as
 * it ends. Its default action is to ignore it, should it reach anyone
 * else. */
#define SHM_TRACER_DOORBELL SIGURG

/* How the image's Python objects reach the recording. */
enum shm_python_mode {
    SHM_PYTHON_NONE = 0,           /* no CPython found in the image */
    SHM_PYTHON_HOOKED = 1,         /* the MEM and OBJ allocator domains are wrapped: every object is
                                      recorded, pymalloc still serves them */
    SHM_PYTHON_MALLOC = 2,         /* the user set PYTHONMALLOC=malloc (or malloc_debug): objects
                                      come from malloc, recorded there */
    SHM_PYTHON_USER_ALLOCATOR = 3, /* the user set another PYTHONMALLOC: left alone, so objects
                                      served by pymalloc are not recorded */
    SHM_PYTHON_NOT_WRAPPED = 4,    /* an interpreter whose domains cannot be wrapped before it starts
                                      (before 3.7): objects served by pymalloc are not recorded */
};

/*
 * Python frames. A backtrace word whose top four bits are SHM_PYTHON_WORD_TAG
 * is a Python frame, not a return address (user-space addresses never have
 * them set): bits 32-59 index the code table, bits 0-31 are the source line
 * the frame was at (0: unknown). The shim puts Python frames in place of
 * the interpreter's C frame (_PyEval_EvalFrameDefault) that ran them, and
 * names a frame by its line rather than its instruction, so allocations
 * from one line share a stack.
 *
 * A code table entry describes one code object, copied out of the process
 * when the shim first sees it, so a code object freed since (a module's
 * top-level code after its import) still has its name: claimed by CAS of
 * key (a hash of the object's address and identity, 0 = empty), filled,
 * then published with a release store of state READY. Strings are UTF-8,
 * not NUL-terminated; the line table is CPython's co_linetable, which the
 * shim reads lines from (the tracer needs only the line in the word).
 * Entry 0 is never used: a frame word naming it is a frame whose code was
 * not copied.
 */
#define SHM_PYTHON_WORD_TAG 0xfull
#define SHM_PYTHON_CODE_ENTRIES (1u << 18) /* power of two */
#define SHM_PYTHON_TEXT_BYTES (16u << 20)

static inline int shm_is_python_word(uint64_t word)
{
    return (word >> 60) == SHM_PYTHON_WORD_TAG;
}

static inline uint64_t shm_python_word(uint32_t code_index, uint32_t line)
{
    return SHM_PYTHON_WORD_TAG << 60 | (uint64_t)(code_index & 0x0fffffffu) << 32 | line;
}

static inline uint32_t shm_python_word_code(uint64_t word)
{
    return (uint32_t)(word >> 32) & 0x0fffffffu;
}

static inline uint32_t shm_python_word_line(uint64_t word)
{
    return (uint32_t)word;
}

struct shm_python_code {
    uint64_t key;           /* 0 = empty; claimed by CAS */
    uint64_t code_address;  /* the code object, and what told it apart from another at the */
    uint64_t identity;      /* same address: the producer's own check; the tracer ignores both */
    uint32_t state;         /* enum shm_stack_state, READY stored with release */
    uint32_t first_line;
    uint32_t qualname_offset, qualname_length;   /* in the Python text pool */
    uint32_t filename_offset, filename_length;
    uint32_t linetable_offset, linetable_length;
};

/*
 * Allocator ranges: memory that an allocator owns and whose every block the
 * shim records, so that the leak scan never takes it for a root (its free
 * parts hold stale pointers) while still scanning whatever else the kernel
 * merged into the same mapping (adjacent anonymous mappings with the same
 * flags become one): CPython's pymalloc arenas while the allocator domains
 * are wrapped. An entry whose start is 0 is free; a producer claims the
 * first free entry below allocator_ranges_used by CAS on start (when
 * allocator_ranges_free says there may be one), or a new one at used
 * (fetch-add), then stores size (release). A released range's entry gets
 * size 0, then start 0. The tracer reads entries [0, used) with
 * the world stopped and skips those of size 0 (a claim in progress).
 */
#define SHM_ALLOCATOR_RANGES (1u << 16) /* 64 GiB of 1 MiB arenas */

struct shm_allocator_range {
    uint64_t start;
    uint64_t size;
};

/*
 * The unwinder's rules, kept across recordings (common/unwind_rules_file.h).
 * Only while SHM_ENV_UNWIND_RULES is set. The shim's unwinder adds a module
 * when it first looks a rule up in it (with the number of rules it read
 * from the module's file; only modules with a build-id), and every rule it
 * then looks up in CFI with libdw (in any module: those without a
 * build-id, or not reported, cannot be kept); each entry is filled and
 * then counted (release), under the unwinder's lookup lock. A child of fork reports its parent's modules
 * again in its own region. The tracer reads them at the image's end and
 * adds the rules to the modules' files.
 */
#define SHM_UNWIND_MODULES 512u
#define SHM_UNWIND_RULES (1u << 16)
#define SHM_UNWIND_MAX_BUILD_ID 32u

struct shm_unwind_module {
    uint64_t start, end; /* the executable mapping */
    uint64_t bias;       /* a rule's offset is its address less the bias */
    uint64_t file_size;  /* of the module's file */
    uint32_t build_id_size; /* 1 to SHM_UNWIND_MAX_BUILD_ID */
    uint32_t rules_kept;    /* rules the shim read from the module's file (0: none, or no file) */
    uint8_t build_id[SHM_UNWIND_MAX_BUILD_ID];
};

struct shm_unwind_rule {
    uint64_t address; /* a return address (the first frame's: an address in its function) */
    uint64_t rule;    /* fast_unwind.c's packed rule */
};

/* The shim stamps events with the CPU's time-stamp counter when the kernel
 * itself trusts it as its clock source (synchronised across CPUs): half the
 * cost of clock_gettime. The tracer converts ticks to nanoseconds. */
enum shm_clock_source { SHM_CLOCK_MONOTONIC_NS = 0, SHM_CLOCK_TSC = 1 };

enum shm_freeres_outcome {
    SHM_FREERES_NOT_REACHED = 0,    /* no exit() or _exit() in this image (yet), or --no-freeres */
    SHM_FREERES_RAN = 1,
    SHM_FREERES_OTHER_THREADS = 2,  /* skipped: other threads still ran */
    SHM_FREERES_SIGNAL_HANDLER = 3, /* skipped: a caught signal blocked, and the thread's stack holds a
                                       handler's return address or could not be read */
    SHM_FREERES_THREADS_UNKNOWN = 4, /* skipped: /proc/self/task could not be read */
};

#define SHM_HEADER_SIZE 4096u
#define SHM_SLOTS_OFFSET SHM_HEADER_SIZE
#define SHM_SLOT_SIZE ((uint64_t)sizeof(struct shm_thread_slot))
#define SHM_STACK_INDEX_OFFSET (SHM_SLOTS_OFFSET + (uint64_t)SHM_MAX_THREADS * SHM_SLOT_SIZE)
#define SHM_STACK_TABLE_OFFSET (SHM_STACK_INDEX_OFFSET + (uint64_t)SHM_STACK_INDEX_SLOTS * sizeof(uint32_t))
#define SHM_FRAME_POOL_OFFSET \
    (SHM_STACK_TABLE_OFFSET + (uint64_t)SHM_STACK_TABLE_ENTRIES * sizeof(struct shm_stack_entry))
#define SHM_NAME_POOL_OFFSET (SHM_FRAME_POOL_OFFSET + (uint64_t)SHM_FRAME_POOL_FRAMES * sizeof(uint64_t))
#define SHM_NAME_POOL_BYTES (1u << 20)
#define SHM_PYTHON_CODE_OFFSET (SHM_NAME_POOL_OFFSET + SHM_NAME_POOL_BYTES)
#define SHM_PYTHON_TEXT_OFFSET \
    (SHM_PYTHON_CODE_OFFSET + (uint64_t)SHM_PYTHON_CODE_ENTRIES * sizeof(struct shm_python_code))
#define SHM_ALLOCATOR_RANGES_OFFSET (SHM_PYTHON_TEXT_OFFSET + SHM_PYTHON_TEXT_BYTES)
#define SHM_UNWIND_MODULES_OFFSET \
    (SHM_ALLOCATOR_RANGES_OFFSET + (uint64_t)SHM_ALLOCATOR_RANGES * sizeof(struct shm_allocator_range))
#define SHM_UNWIND_RULES_OFFSET \
    (SHM_UNWIND_MODULES_OFFSET + (uint64_t)SHM_UNWIND_MODULES * sizeof(struct shm_unwind_module))
#define SHM_TOTAL_SIZE (SHM_UNWIND_RULES_OFFSET + (uint64_t)SHM_UNWIND_RULES * sizeof(struct shm_unwind_rule))

static inline struct shm_thread_slot *shm_slot(void *base, uint32_t index)
{
    return (struct shm_thread_slot *)((char *)base + SHM_SLOTS_OFFSET + (uint64_t)index * SHM_SLOT_SIZE);
}

static inline uint32_t *shm_stack_index(void *base)
{
    return (uint32_t *)((char *)base + SHM_STACK_INDEX_OFFSET);
}

static inline struct shm_stack_entry *shm_stack_table(void *base)
{
    return (struct shm_stack_entry *)((char *)base + SHM_STACK_TABLE_OFFSET);
}

static inline uint64_t *shm_frame_pool(void *base)
{
    return (uint64_t *)((char *)base + SHM_FRAME_POOL_OFFSET);
}

static inline char *shm_name_pool(void *base)
{
    return (char *)base + SHM_NAME_POOL_OFFSET;
}

static inline struct shm_python_code *shm_python_code_table(void *base)
{
    return (struct shm_python_code *)((char *)base + SHM_PYTHON_CODE_OFFSET);
}

static inline char *shm_python_text_pool(void *base)
{
    return (char *)base + SHM_PYTHON_TEXT_OFFSET;
}

static inline struct shm_allocator_range *shm_allocator_ranges(void *base)
{
    return (struct shm_allocator_range *)((char *)base + SHM_ALLOCATOR_RANGES_OFFSET);
}

static inline struct shm_unwind_module *shm_unwind_modules(void *base)
{
    return (struct shm_unwind_module *)((char *)base + SHM_UNWIND_MODULES_OFFSET);
}

static inline struct shm_unwind_rule *shm_unwind_rules(void *base)
{
    return (struct shm_unwind_rule *)((char *)base + SHM_UNWIND_RULES_OFFSET);
}

#endif
