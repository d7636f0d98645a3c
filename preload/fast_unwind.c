/* fast_unwind.c - see fast_unwind.h.
 *
 * The rule table is global (return addresses are the same in every thread)
 * and lock-free for readers: a slot is claimed by a CAS of its address from
 * 0, then its rule is stored with release; a reader takes a rule of 0 as a
 * miss. Slots are never reused, so a rule once seen stays valid. Lookups of
 * new rules (rare after warm-up) take a lock: libdw's CFI caches are not
 * safe to share between threads.
 *
 * Rules kept across recordings (common/unwind_rules_file.h) are read when
 * a module is first met, under that lock, and found afterwards without
 * it: a module entry is complete before module_count counts it (release),
 * and its kept rules, read into memory of their own, stay (read-only).
 *
 * Fork: the lock is an owner_lock.h, so a fork child whose parent had
 * another thread inside a lookup takes it over instead of waiting for ever.
 * That lookup was in one module's CFI (lookup_module says which), whose
 * libdw caches it may have left half updated: the child looks up no rule
 * in that module's CFI again (its unwinds through it fall back, and what
 * they find is not reported as a rule to keep). Other modules, cached and
 * kept rules serve as before.
 */
#include "fast_unwind.h"
#include "near_probe.h"
#include "owner_lock.h"
#include "read_set.h"
#include "stack_table.h"
#include "../common/unwind_rules_file.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwelf.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <link.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define RULE_TABLE_SIZE (1u << 17) /* power of two */
#define RULE_PROBES 16
/* The table's near part (near_probe.h): 32 pages for the rules of a
 * program that allocates from up to a few thousand call sites. */
#define RULE_NEAR_SLOTS (1u << 13)
#define RULE_NEAR_PROBES 16
#define MAX_MODULES 512

/* DWARF register numbers on x86-64. */
#define DWARF_RBP 6
#define DWARF_RSP 7
#define DWARF_RA 16

enum rule_kind { RULE_NONE = 0, RULE_CFA_RSP = 1, RULE_CFA_RBP = 2, RULE_OUTERMOST = 3, RULE_UNSUPPORTED = 4 };

/* A rule packed in 64 bits (0 = not known yet):
 *   bits 0-3   enum rule_kind
 *   bit  4     the caller's rbp is saved at CFA + rbp_offset
 *   bits 8-31  CFA offset from rsp or rbp (unsigned, < 2^24)
 *   bits 32-63 rbp_offset (signed) */
typedef uint64_t packed_rule;

struct rule_slot {
    uint64_t ip;
    packed_rule rule;
};

struct module_cfi {
    uint64_t start, end; /* the executable mapping's address range */
    uint64_t bias;
    Elf *elf;
    Dwarf_CFI *cfi;
    uint64_t file_size;
    uint8_t build_id[UNWIND_RULES_MAX_BUILD_ID];
    uint32_t build_id_size; /* 0: none read (or no kept rules wanted) */
    const struct unwind_rule_entry *kept; /* the module's kept rules (read-only memory of their own), or NULL */
    size_t kept_count;
    bool cfi_suspect; /* a fork cut a lookup in its CFI short (see the top) */
};

/* Process-wide state of the shim's unwinder: the shim is the one place where
 * global mutable state is unavoidable (it lives inside someone else's
 * process and has no context to pass around). */
static struct rule_slot rule_table[RULE_TABLE_SIZE];
static struct owner_lock lookup_lock = OWNER_LOCK_INIT;
static struct module_cfi *lookup_module; /* whose CFI a lookup is in, under lookup_lock */
static struct module_cfi modules[MAX_MODULES];
static size_t module_count; /* stored with release once modules[count - 1] is complete */
static uint64_t rules_cached, rules_unsupported;
/* Where kept rules are read from ("": nowhere), and who is told. */
static char kept_rules_directory[4096];
static struct fast_unwind_observer observer;

static inline packed_rule pack(enum rule_kind kind, uint32_t cfa_offset, bool rbp_saved, int32_t rbp_offset)
{
    return (uint64_t)kind | (rbp_saved ? 16u : 0u) | ((uint64_t)(cfa_offset & 0xffffffu) << 8) |
           ((uint64_t)(uint32_t)rbp_offset << 32);
}

/* A product's low bits depend on the ip's low bits only: its high half is
 * folded in, for the near part's slots. */
static inline uint64_t rule_hash(uint64_t ip)
{
    uint64_t product = ip * 0x9e3779b97f4a7c15ull;
    return product ^ (product >> 32);
}

static inline struct rule_slot *rule_slot_at(uint64_t hash, uint32_t probe)
{
    return &rule_table[near_probe_slot(hash, probe, RULE_NEAR_SLOTS, RULE_NEAR_PROBES, RULE_TABLE_SIZE)];
}

static inline packed_rule cached_rule(uint64_t ip)
{
    uint64_t hash = rule_hash(ip);
    for (uint32_t probe = 0; probe < RULE_NEAR_PROBES + RULE_PROBES; probe++) {
        struct rule_slot *slot = rule_slot_at(hash, probe);
        uint64_t key = __atomic_load_n(&slot->ip, __ATOMIC_ACQUIRE);
        if (key == ip)
            return __atomic_load_n(&slot->rule, __ATOMIC_ACQUIRE);
        if (key == 0)
            return 0;
    }
    return 0;
}

static void cache_rule(uint64_t ip, packed_rule rule)
{
    uint64_t hash = rule_hash(ip);
    for (uint32_t probe = 0; probe < RULE_NEAR_PROBES + RULE_PROBES; probe++) {
        struct rule_slot *slot = rule_slot_at(hash, probe);
        uint64_t expected = 0;
        if (__atomic_compare_exchange_n(&slot->ip, &expected, ip, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE) ||
            expected == ip) {
            __atomic_store_n(&slot->rule, rule, __ATOMIC_RELEASE);
            return;
        }
    }
    /* Table full around this slot: the rule is looked up again next time. */
}

/* ---- finding a module's CFI ------------------------------------------------ */

struct find_module {
    uint64_t ip;
    uint64_t bias, start, end;
    const char *name;
    bool found;
};

static int find_module_callback(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    struct find_module *find = data;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *phdr = &info->dlpi_phdr[i];
        if (phdr->p_type != PT_LOAD || !(phdr->p_flags & PF_X))
            continue;
        uint64_t start = info->dlpi_addr + phdr->p_vaddr, end = start + phdr->p_memsz;
        if (find->ip >= start && find->ip < end) {
            find->bias = info->dlpi_addr;
            find->start = start;
            find->end = end;
            find->name = info->dlpi_name;
            find->found = true;
            return 1;
        }
    }
    return 0;
}

/* The module's GNU build-id and file size, which name its kept rules. */
static void identify_module(struct module_cfi *module, int fd)
{
    struct stat status;
    const void *id;
    ssize_t size = module->elf ? dwelf_elf_gnu_build_id(module->elf, &id) : -1;
    if (size <= 0 || size > (ssize_t)UNWIND_RULES_MAX_BUILD_ID || fstat(fd, &status) != 0)
        return;
    memcpy(module->build_id, id, (size_t)size);
    module->build_id_size = (uint32_t)size;
    module->file_size = (uint64_t)status.st_size;
}

/* Reads the module's kept rules, when its file in the directory is whole
 * and for this module. Under lookup_lock (the path's buffer). */
static void read_kept_rules(struct module_cfi *module)
{
    static char path[sizeof kept_rules_directory + 2 * UNWIND_RULES_MAX_BUILD_ID + 32];
    int at = snprintf(path, sizeof path, "%s/", kept_rules_directory);
    for (uint32_t i = 0; i < module->build_id_size; i++)
        at += snprintf(path + at, sizeof path - (size_t)at, "%02x", module->build_id[i]);
    snprintf(path + at, sizeof path - (size_t)at, "-%llx%s", (unsigned long long)module->file_size,
             UNWIND_RULES_FILE_SUFFIX);
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0)
        return;
    struct stat status;
    void *bytes = MAP_FAILED;
    if (fstat(fd, &status) == 0 && S_ISREG(status.st_mode) && status.st_size > 0 &&
        (uint64_t)status.st_size <= unwind_rules_file_size(UNWIND_RULES_FILE_MAX_ENTRIES))
        bytes = mmap(NULL, (size_t)status.st_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    /* Read, not mapped: a file mapped could be cut (SIGBUS in the program,
     * perhaps in a signal handler's unwind) or changed after its check. */
    size_t size = bytes == MAP_FAILED ? 0 : (size_t)status.st_size, done = 0;
    while (done < size) {
        ssize_t n = read(fd, (uint8_t *)bytes + done, size - done);
        if (n <= 0 && !(n < 0 && errno == EINTR))
            break;
        done += n > 0 ? (size_t)n : 0;
    }
    close(fd);
    if (bytes == MAP_FAILED)
        return;
    if (done != size ||
        unwind_rules_file_check(bytes, size, module->build_id, module->build_id_size, module->file_size,
                                &module->kept, &module->kept_count) != 0 ||
        module->kept_count == 0) {
        munmap(bytes, size);
        module->kept = NULL;
        module->kept_count = 0;
        return;
    }
    mprotect(bytes, size, PROT_READ);
}

static void announce_module(const struct module_cfi *module)
{
    if (!observer.module_added || !module->build_id_size)
        return;
    struct fast_unwind_module_info info = {module->start,       module->end,
                                           module->bias,        module->file_size,
                                           module->build_id,    module->build_id_size,
                                           (uint32_t)module->kept_count};
    observer.module_added(&info);
}

static struct module_cfi *module_for(uint64_t ip)
{
    for (size_t i = 0; i < module_count; i++)
        if (ip >= modules[i].start && ip < modules[i].end)
            return &modules[i];
    if (module_count == MAX_MODULES)
        return NULL;
    struct find_module find = {.ip = ip};
    dl_iterate_phdr(find_module_callback, &find);
    if (!find.found)
        return NULL;
    /* The main program's name is empty; [vdso] has no file. */
    const char *path = find.name && find.name[0] ? find.name : "/proc/self/exe";
    struct module_cfi *module = &modules[module_count];
    memset(module, 0, sizeof *module);
    module->start = find.start;
    module->end = find.end;
    module->bias = find.bias;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        elf_version(EV_CURRENT);
        module->elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
        module->cfi = module->elf ? dwarf_getcfi_elf(module->elf) : NULL;
        if (kept_rules_directory[0]) {
            identify_module(module, fd);
            if (module->build_id_size)
                read_kept_rules(module);
        }
        /* Once the file is mapped (or read in whole where mapping failed;
         * ELF_C_FDREAD then also marks the descriptor done) the descriptor
         * can go: the program should not see it. */
        if (!module->elf || elf_cntl(module->elf, ELF_C_FDREAD) == 0)
            close(fd);
    }
    /* kept even without CFI: its frames fall back */
    __atomic_store_n(&module_count, module_count + 1, __ATOMIC_RELEASE);
    announce_module(module);
    return module;
}

/* A rule of a module met before, from its kept rules: neither allocates
 * nor locks. 0 when there is none. */
static packed_rule kept_rule(uint64_t ip)
{
    size_t count = __atomic_load_n(&module_count, __ATOMIC_ACQUIRE);
    for (size_t i = 0; i < count; i++) {
        const struct module_cfi *module = &modules[i];
        if (ip < module->start || ip >= module->end)
            continue;
        const struct unwind_rule_entry *entry =
            module->kept ? unwind_rules_find(module->kept, module->kept_count, ip - module->bias) : NULL;
        if (!entry)
            return 0;
        cache_rule(ip, entry->rule);
        if (observer.rule_reused)
            observer.rule_reused();
        return entry->rule;
    }
    return 0;
}

/* Takes the lookup lock; from a fork child whose parent's other thread was
 * inside a lookup, marks the module of that lookup. */
static void lookup_lock_acquire(void)
{
    if (owner_lock_acquire(&lookup_lock) == OWNER_LOCK_TAKEN_OVER && lookup_module) {
        lookup_module->cfi_suspect = true;
        lookup_module = NULL;
    }
}

void fast_unwind_keep_rules(const char *directory, const struct fast_unwind_observer *told)
{
    lookup_lock_acquire();
    if (directory && strlen(directory) < sizeof kept_rules_directory)
        snprintf(kept_rules_directory, sizeof kept_rules_directory, "%s", directory);
    observer = told ? *told : (struct fast_unwind_observer){0};
    owner_lock_release(&lookup_lock);
}

/* Without the lookup lock: called from the fork child handler, where
 * nothing else runs, and reports only what was complete before the fork. */
void fast_unwind_announce_modules(void)
{
    size_t count = __atomic_load_n(&module_count, __ATOMIC_ACQUIRE);
    for (size_t i = 0; i < count; i++)
        announce_module(&modules[i]);
}

/* ---- rules from CFI ------------------------------------------------------------ */

/* The register's rule as "saved at CFA + offset": 1; "same value": 0;
 * anything else: -1. */
static int saved_at_cfa_offset(Dwarf_Frame *frame, int regno, int64_t *offset)
{
    Dwarf_Op ops_mem[3], *ops;
    size_t nops;
    if (dwarf_frame_register(frame, regno, ops_mem, &ops, &nops) != 0)
        return -1;
    if (nops == 0)
        return ops == NULL ? 0 : -1; /* same value, or undefined */
    if (ops[0].atom != DW_OP_call_frame_cfa)
        return -1;
    if (nops == 1) {
        *offset = 0;
        return 1;
    }
    if (nops == 2 && ops[1].atom == DW_OP_plus_uconst) {
        *offset = (int64_t)ops[1].number;
        return 1;
    }
    if (nops == 3 && ops[1].atom == DW_OP_consts && ops[2].atom == DW_OP_plus) {
        *offset = (int64_t)ops[1].number;
        return 1;
    }
    return -1;
}

static packed_rule rule_from_frame(Dwarf_Frame *frame)
{
    Dwarf_Op *ops;
    size_t nops;
    bool signal_frame = false;
    if (dwarf_frame_info(frame, NULL, NULL, &signal_frame) < 0 || signal_frame)
        return pack(RULE_UNSUPPORTED, 0, false, 0);
    /* The outermost frame marks its return address undefined. */
    Dwarf_Op ra_mem[3], *ra_ops;
    size_t ra_nops;
    if (dwarf_frame_register(frame, DWARF_RA, ra_mem, &ra_ops, &ra_nops) == 0 && ra_nops == 0 && ra_ops != NULL)
        return pack(RULE_OUTERMOST, 0, false, 0);
    if (dwarf_frame_cfa(frame, &ops, &nops) != 0 || nops != 1 || ops[0].atom != DW_OP_bregx)
        return pack(RULE_UNSUPPORTED, 0, false, 0);
    uint64_t base = ops[0].number;
    int64_t cfa_offset = (int64_t)ops[0].number2;
    if ((base != DWARF_RSP && base != DWARF_RBP) || cfa_offset < 0 || cfa_offset >= (1 << 24))
        return pack(RULE_UNSUPPORTED, 0, false, 0);
    int64_t ra_offset = 0, rbp_offset = 0;
    if (saved_at_cfa_offset(frame, DWARF_RA, &ra_offset) != 1 || ra_offset != -8)
        return pack(RULE_UNSUPPORTED, 0, false, 0);
    int rbp = saved_at_cfa_offset(frame, DWARF_RBP, &rbp_offset);
    if (rbp < 0 || rbp_offset < INT32_MIN || rbp_offset > INT32_MAX)
        return pack(RULE_UNSUPPORTED, 0, false, 0);
    return pack(base == DWARF_RSP ? RULE_CFA_RSP : RULE_CFA_RBP, (uint32_t)cfa_offset, rbp == 1, (int32_t)rbp_offset);
}

/* ip is a return address except for the first frame; both are looked up at
 * ip - 1, inside the call instruction (or just before the first frame's
 * point, which lies in the same rule range for a call site). */
static packed_rule look_up_rule(uint64_t ip)
{
    lookup_lock_acquire();
    packed_rule rule = cached_rule(ip);
    struct module_cfi *module = rule ? NULL : module_for(ip);
    if (!rule && !(rule = kept_rule(ip))) {
        if (module && module->cfi_suspect) {
            owner_lock_release(&lookup_lock);
            return pack(RULE_UNSUPPORTED, 0, false, 0); /* neither cached nor reported: not CFI's answer */
        }
        Dwarf_Frame *frame = NULL;
        lookup_module = module;
        if (module && module->cfi && dwarf_cfi_addrframe(module->cfi, ip - 1 - module->bias, &frame) == 0) {
            rule = rule_from_frame(frame);
            free(frame);
        } else {
            rule = pack(RULE_UNSUPPORTED, 0, false, 0);
        }
        cache_rule(ip, rule);
        if (observer.rule_looked_up)
            observer.rule_looked_up(ip, rule);
        lookup_module = NULL; /* after the report: a fork in it marks the module too, harmlessly */
        if ((rule & 15) == RULE_UNSUPPORTED)
            rules_unsupported++;
        else
            rules_cached++;
    }
    owner_lock_release(&lookup_lock);
    return rule;
}

/* ---- the unwind, and its memo ------------------------------------------------- */

enum unwind_end { END_MAX = 0, END_OUTERMOST = 1, END_ZERO = 2 };

static inline uint64_t read_stack_word(uint64_t address)
{
    return *(const uint64_t *)(uintptr_t)address;
}

/* Copies of a few words, inline: libc's memcpy for them cost more than
 * the unwind it saved (a call per copy, and on AVX-512 machines its vector
 * path showed as 11% of the benchmark's time). The empty asm hides the
 * loop's shape from the compiler, which would turn it back into memcpy. */
static inline void copy_words(uint64_t *to, const uint64_t *from, uint32_t count)
{
    for (uint32_t i = 0; i < count; i++) {
        to[i] = from[i];
        __asm__("" : "+r"(i));
    }
}

/* The frames' rbp state, for memo_finish to complete (their suffix
 * hashes it computes anyway): one frame's four words at a time, through
 * registers, so no vector load reads words stored separately. */
static inline void copy_frames(struct fast_unwind_memo_frame *to, const struct fast_unwind_memo_frame *from,
                               uint32_t count)
{
    for (uint32_t i = 0; i < count; i++) {
        uint64_t sp = from[i].sp, bp = from[i].bp, bp_slot = from[i].bp_slot, flags = from[i].flags;
        __asm__("" : "+r"(sp), "+r"(bp), "+r"(bp_slot), "+r"(flags));
        to[i].sp = sp;
        to[i].bp = bp;
        to[i].bp_slot = bp_slot;
        to[i].flags = flags;
    }
}

/* A frame as the walk found it, for the memo (memo_finish adds its suffix
 * hash and the rest of its flags). */
static inline void remember_step(struct fast_unwind_memo_frame *frame, uint64_t sp, uint64_t bp, uint64_t bp_slot,
                                 uint64_t flags)
{
    frame->sp = sp;
    frame->bp = bp;
    frame->bp_slot = bp_slot;
    frame->flags = flags;
}

/* The memo's frames are the last count slots of its arrays, innermost
 * first: a backtrace that shares the outer frames of the previous one
 * writes only its own inner frames in front of them, whatever its depth,
 * and the outer ones never move. */
static inline uint32_t memo_first(const struct fast_unwind_memo *memo)
{
    return FAST_UNWIND_MEMO_FRAMES - memo->count;
}

static inline const uint64_t *memo_ips(const struct fast_unwind_memo *memo)
{
    return memo->ip + memo_first(memo);
}

static inline struct fast_unwind_memo_frame *memo_frames(struct fast_unwind_memo *memo)
{
    return memo->frame + memo_first(memo);
}

/* How many of the remembered frames from slot `at` on can follow the
 * count frames unwound so far: those whose stack words, the ones they were
 * unwound from, still hold what they held. The words are checked frame by
 * frame outwards, so a read happens only where the ordinary unwind, having
 * found the same frames so far, would read too. 0: none can, and *resume
 * is the first slot a later match may start from. A word that no longer
 * holds what it held rules out every frame inside it (a match from any of
 * them checks that word too) but none outside: the unwind goes on and may
 * meet the remembered frames again further out, as a Python allocation
 * does when it comes from another builtin than the previous one, below the
 * same interpreter frame. */
static uint32_t reuse_memo(const struct fast_unwind_memo *memo, uint32_t at, const struct fast_unwind_regs *start,
                           uint64_t stack_limit, int count, int max, uint32_t *resume)
{
    uint32_t available = FAST_UNWIND_MEMO_FRAMES - at, wanted = (uint32_t)(max - count);
    uint32_t used = available < wanted ? available : wanted;
    *resume = at + 1;
    if (used < wanted && memo->ended == END_MAX)
        return 0; /* it stopped at its own limit: what lies beyond is unknown */
    const struct fast_unwind_memo_frame *stop = &memo->frame[at + used - 1];
    if (stop->sp > stack_limit)
        return 0;
    const uint64_t *expected = &memo->ip[at + 1];
    for (const struct fast_unwind_memo_frame *f = &memo->frame[at]; f < stop; f++, expected++) {
        if (read_stack_word(f[1].sp - 8) != *expected ||
            ((f->flags & FAST_UNWIND_CHECK_BP) && (f->bp_slot < start->sp || f->bp_slot + 8 > stack_limit ||
                                                   read_stack_word(f->bp_slot) != f[1].bp))) {
            *resume = (uint32_t)(f - memo->frame) + 1;
            return 0;
        }
    }
    if (used < wanted && memo->ended == END_ZERO &&
        (memo->end_slot + 8 > stack_limit || read_stack_word(memo->end_slot) != 0))
        return 0;
    return used;
}

/* Suffix hashes and rbp flags of frames [0, from), from frame `from` (or
 * the end). Which frames' incoming rbp the unwind from them on reads: its
 * own CFA rule's, or a caller's as long as no frame in between reloads rbp
 * from the stack; past the last frame only an unwind cut at its limit goes
 * on. */
static inline void memo_finish(struct fast_unwind_memo *memo, uint32_t from)
{
    struct fast_unwind_memo_frame *frames = memo_frames(memo);
    const uint64_t *ip = memo_ips(memo);
    uint64_t hash = STACK_HASH_SEED;
    bool next = memo->ended == END_MAX; /* whether the caller's rbp matters */
    if (from < memo->count) {
        hash = frames[from].suffix_hash;
        next = frames[from].flags & FAST_UNWIND_BP_MATTERS;
    }
    for (uint32_t i = from; i-- > 0;) {
        struct fast_unwind_memo_frame *frame = &frames[i];
        hash = stack_hash_fold(hash, ip[i]);
        frame->suffix_hash = hash;
        bool matters = (frame->flags & FAST_UNWIND_USES_BP) || (!frame->bp_slot && next);
        frame->flags = (frame->flags & FAST_UNWIND_USES_BP) | (matters ? FAST_UNWIND_BP_MATTERS : 0) |
                       (frame->bp_slot && next ? FAST_UNWIND_CHECK_BP : 0);
        next = matters;
    }
}

/* A whole unwind of count frames, as the memo for the next one. */
static void remember_walk(struct fast_unwind_memo *memo, const uint64_t *frames,
                          const struct fast_unwind_memo_frame *walked, int count, enum unwind_end end,
                          uint64_t end_slot)
{
    uint32_t kept = (uint32_t)count;
    if (kept > FAST_UNWIND_MEMO_FRAMES) {
        kept = FAST_UNWIND_MEMO_FRAMES;
        end = END_MAX;
    }
    copy_frames(memo->frame + FAST_UNWIND_MEMO_FRAMES - kept, walked, kept);
    copy_words(memo->ip + FAST_UNWIND_MEMO_FRAMES - kept, frames, kept);
    memo->count = kept;
    memo->ended = end;
    memo->end_slot = end_slot;
    memo_finish(memo, kept);
}

/* After reuse_memo took `used` frames from slot `taken`: the count new
 * inner frames, then those. The frames taken stay where they are unless
 * the backtrace was cut short of the memo's last frames (by max). */
static void remember_prefix(struct fast_unwind_memo *memo, const uint64_t *frames,
                            const struct fast_unwind_memo_frame *walked, int count, uint32_t taken, uint32_t used)
{
    uint32_t inner = (uint32_t)count;
    bool cut = taken + used < FAST_UNWIND_MEMO_FRAMES; /* frames past `used` were not checked */
    if (inner + used > FAST_UNWIND_MEMO_FRAMES) {
        if (inner >= FAST_UNWIND_MEMO_FRAMES) {
            memo->count = 0;
            return;
        }
        used = FAST_UNWIND_MEMO_FRAMES - inner;
        cut = true;
    }
    uint32_t first = FAST_UNWIND_MEMO_FRAMES - used - inner;
    if (taken + used != FAST_UNWIND_MEMO_FRAMES) {
        memmove(&memo->frame[FAST_UNWIND_MEMO_FRAMES - used], &memo->frame[taken], used * sizeof memo->frame[0]);
        memmove(&memo->ip[FAST_UNWIND_MEMO_FRAMES - used], &memo->ip[taken], used * sizeof memo->ip[0]);
    }
    copy_frames(memo->frame + first, walked, inner);
    copy_words(memo->ip + first, frames, inner);
    memo->count = inner + used;
    if (cut)
        memo->ended = END_MAX;
    memo_finish(memo, cut ? memo->count : inner);
}

/* Where the count frames of the result are, and their unfinished hash: in
 * the memo when it holds exactly those frames (its suffix hashes cover
 * every outer frame it holds), else in the caller's buffer. */
static inline void set_result(struct fast_unwind_result *result, const struct fast_unwind_memo *memo,
                       const uint64_t *buffer, int count)
{
    if (memo && memo->count == (uint32_t)count && count > 0) {
        result->frames = memo->ip + memo_first(memo);
        result->suffix = memo->frame + memo_first(memo);
        result->hash = result->suffix[0].suffix_hash;
    } else {
        result->frames = buffer;
        result->hash = stack_hash_unfinished(buffer, (uint32_t)count);
        result->suffix = NULL;
    }
}

int fast_unwind(const struct fast_unwind_regs *start, uint64_t stack_limit, uint64_t *frames, int max, int lookup,
                struct fast_unwind_memo *memo, struct fast_unwind_result *result)
{
    struct fast_unwind_memo_frame walked[FAST_UNWIND_MEMO_FRAMES];
    uint64_t ip = start->ip, sp = start->sp, bp = start->bp, end_slot = 0;
    int count = 0;
    /* the memo's slot to match next (its frames end at the last slot); past it: none */
    uint32_t cursor = memo && memo->count ? memo_first(memo) : FAST_UNWIND_MEMO_FRAMES;
    enum unwind_end end = END_MAX;
    while (count < max) {
        if (!ip) {
            end = END_ZERO;
            break;
        }
        if (cursor < FAST_UNWIND_MEMO_FRAMES) {
            /* stack pointers only grow outwards: the memo's frames inside this one are past */
            while (cursor < FAST_UNWIND_MEMO_FRAMES && memo->frame[cursor].sp < sp)
                cursor++;
            if (cursor < FAST_UNWIND_MEMO_FRAMES && memo->frame[cursor].sp == sp && memo->ip[cursor] == ip &&
                (memo->frame[cursor].bp == bp || !(memo->frame[cursor].flags & FAST_UNWIND_BP_MATTERS))) {
                uint32_t resume, used = reuse_memo(memo, cursor, start, stack_limit, count, max, &resume);
                if (used) {
                    /* the frames stay in the memo, unless it cannot hold them all */
                    if (!result || (uint32_t)count + used > FAST_UNWIND_MEMO_FRAMES)
                        copy_words(frames + count, memo->ip + cursor, used);
                    memo->reused++;
                    remember_prefix(memo, frames, walked, count, cursor, used);
                    count += (int)used;
                    if (result)
                        set_result(result, memo, frames, count);
                    return count;
                }
                cursor = resume; /* changed from here: unwind on, and match further out */
            }
        }
        packed_rule rule = cached_rule(ip);
        if (__builtin_expect(rule == 0, 0) && !(rule = kept_rule(ip))) {
            if (!lookup)
                return FAST_UNWIND_NEEDS_LOOKUP;
            rule = look_up_rule(ip);
        }
        unsigned kind = rule & 15;
        if (kind == RULE_OUTERMOST) {
            if (count < FAST_UNWIND_MEMO_FRAMES)
                remember_step(&walked[count], sp, bp, 0, 0);
            frames[count++] = ip;
            end = END_OUTERMOST;
            break;
        }
        if (kind != RULE_CFA_RSP && kind != RULE_CFA_RBP)
            return FAST_UNWIND_UNSUPPORTED;
        uint64_t cfa = (kind == RULE_CFA_RSP ? sp : bp) + ((rule >> 8) & 0xffffff);
        if (cfa <= sp || cfa > stack_limit || cfa < 8)
            return FAST_UNWIND_UNSUPPORTED;
        uint64_t caller_bp = bp, bp_slot = 0;
        if (rule & 16) {
            bp_slot = cfa + (uint64_t)(int64_t)(int32_t)(rule >> 32);
            if (bp_slot < start->sp || bp_slot + 8 > stack_limit)
                return FAST_UNWIND_UNSUPPORTED;
            caller_bp = read_stack_word(bp_slot);
        }
        if (count < FAST_UNWIND_MEMO_FRAMES)
            remember_step(&walked[count], sp, bp, bp_slot, kind == RULE_CFA_RBP ? FAST_UNWIND_USES_BP : 0);
        frames[count++] = ip;
        ip = read_stack_word(cfa - 8);
        end_slot = cfa - 8;
        sp = cfa;
        bp = caller_bp;
    }
    if (memo && count > 0)
        remember_walk(memo, frames, walked, count, end, end_slot);
    if (result)
        set_result(result, memo, frames, count);
    return count;
}

bool fast_unwind_memo_reads(const struct fast_unwind_memo *memo, const struct fast_unwind_regs *start, int count,
                            int max, struct read_set *reads, bool *bp_matters)
{
    if (count <= 0 || memo->count != (uint32_t)count)
        return false;
    const struct fast_unwind_memo_frame *frames = memo->frame + memo_first(memo);
    const uint64_t *ip = memo_ips(memo);
    if (frames[0].sp != start->sp || ip[0] != start->ip)
        return false;
    /* reuse_memo's checks from the first frame on, in its order */
    for (uint32_t i = 0; i + 1 < memo->count; i++) {
        read_set_add_word(reads, frames[i + 1].sp - 8, ip[i + 1]);
        if (frames[i].flags & FAST_UNWIND_CHECK_BP)
            read_set_add_word(reads, frames[i].bp_slot, frames[i + 1].bp);
    }
    if (count < max && memo->ended == END_MAX)
        return false;
    if (count < max && memo->ended == END_ZERO)
        read_set_add_word(reads, memo->end_slot, 0);
    *bp_matters = frames[0].flags & FAST_UNWIND_BP_MATTERS;
    return !reads->overflow;
}

void fast_unwind_stats(uint64_t *cached, uint64_t *unsupported)
{
    lookup_lock_acquire();
    *cached = rules_cached;
    *unsupported = rules_unsupported;
    owner_lock_release(&lookup_lock);
}
