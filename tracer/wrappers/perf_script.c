/* perf_script.c - the `perf script` text parser; see perf_script.h. */
#include "perf_script.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/growable_array.h"

/* A byte range of the input; the parser copies only what it interns. */
struct span {
    const char *text;
    size_t length;
};

/* A frame of the sample being read, pointing into the input. */
struct pending_frame {
    uint64_t ip;
    struct span function; /* length 0: unknown */
    struct span module;   /* length 0: unknown */
    struct span file;     /* length 0: none */
    uint32_t line;
    int inlined;
};

/* Open addressing over indexes into one of the profile's arrays. */
struct hash_table {
    uint32_t *slots; /* PERF_NO_NODE: empty */
    uint64_t *hashes;
    size_t capacity; /* a power of two, or 0 */
    size_t count;
};

struct perf_index {
    struct hash_table frames, nodes, threads;
    size_t frames_capacity, nodes_capacity, threads_capacity, samples_capacity;
};

struct parser {
    struct perf_profile *profile;
    struct perf_index *index;
    int in_sample;            /* a header was read and its sample is open */
    uint32_t thread;          /* the open sample's thread */
    int last_line_had_frame;  /* a srcline line may follow */
    int frame_dropped;        /* ... for a frame past the depth cap */
    int stack_truncated;
    size_t depth;
    struct pending_frame *pending; /* grows to PERF_MAX_STACK_DEPTH */
    size_t pending_capacity;
};

/* ---- small helpers ------------------------------------------------------ */

static int is_blank(char c) { return c == ' ' || c == '\t' || c == '\r'; }
static int is_digit(char c) { return c >= '0' && c <= '9'; }

static int is_hex(char c)
{
    return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static struct span trim(struct span s)
{
    while (s.length > 0 && is_blank(s.text[0])) {
        s.text++;
        s.length--;
    }
    while (s.length > 0 && is_blank(s.text[s.length - 1]))
        s.length--;
    return s;
}

static int span_equals(struct span s, const char *literal)
{
    size_t n = strlen(literal);
    return s.length == n && memcmp(s.text, literal, n) == 0;
}

static int span_ends_with(struct span s, const char *literal)
{
    size_t n = strlen(literal);
    return s.length >= n && memcmp(s.text + s.length - n, literal, n) == 0;
}

/* Next whitespace-separated token at or after *cursor, within s. */
static int next_token(struct span s, size_t *cursor, struct span *token)
{
    size_t i = *cursor;
    while (i < s.length && is_blank(s.text[i]))
        i++;
    if (i >= s.length)
        return 0;
    size_t start = i;
    while (i < s.length && !is_blank(s.text[i]))
        i++;
    token->text = s.text + start;
    token->length = i - start;
    *cursor = i;
    return 1;
}

static int all_digits(const char *text, size_t length)
{
    if (length == 0)
        return 0;
    for (size_t i = 0; i < length; i++)
        if (!is_digit(text[i]))
            return 0;
    return 1;
}

static int all_hex(struct span s)
{
    if (s.length == 0 || s.length > 16)
        return 0;
    for (size_t i = 0; i < s.length; i++)
        if (!is_hex(s.text[i]))
            return 0;
    return 1;
}

static uint64_t parse_hex(struct span s)
{
    uint64_t value = 0;
    for (size_t i = 0; i < s.length; i++) {
        char c = s.text[i];
        int digit = is_digit(c) ? c - '0' : (c | 0x20) - 'a' + 10;
        value = value << 4 | (uint64_t)digit;
    }
    return value;
}

/* Decimal digits to a long, saturating rather than overflowing. */
static long parse_decimal(const char *text, size_t length)
{
    long value = 0;
    for (size_t i = 0; i < length; i++) {
        if (value > (LONG_MAX - 9) / 10)
            return LONG_MAX;
        value = value * 10 + (text[i] - '0');
    }
    return value;
}

static uint64_t fnv1a(uint64_t hash, const void *data, size_t length)
{
    const unsigned char *bytes = data;
    for (size_t i = 0; i < length; i++) {
        hash ^= bytes[i];
        hash *= 1099511628211ULL;
    }
    return hash;
}

#define FNV_OFFSET 14695981039346656037ULL

static uint64_t hash_span(uint64_t hash, struct span s)
{
    hash = fnv1a(hash, s.text, s.length);
    return fnv1a(hash, "\x1f", 1); /* keeps "ab"+"c" apart from "a"+"bc" */
}

static char *copy_span(struct span s)
{
    if (s.length == 0)
        return NULL;
    char *copy = malloc(s.length + 1);
    if (copy) {
        memcpy(copy, s.text, s.length);
        copy[s.length] = '\0';
    }
    return copy;
}

/* Equal when both are absent, or the stored string is exactly the span. A
 * span with a NUL byte never equals its copy: a duplicate, not an error. */
static int stored_equals(const char *stored, struct span s)
{
    if (!stored)
        return s.length == 0;
    return s.length > 0 && strnlen(stored, s.length + 1) == s.length && memcmp(stored, s.text, s.length) == 0;
}

/* ---- hash table --------------------------------------------------------- */

typedef int (*entry_equals)(const struct perf_profile *profile, uint32_t index, const void *key);

static int table_grow(struct hash_table *table)
{
    size_t capacity = table->capacity ? table->capacity * 2 : 256;
    uint32_t *slots = malloc(capacity * sizeof *slots);
    uint64_t *hashes = malloc(capacity * sizeof *hashes);
    if (!slots || !hashes) {
        free(slots);
        free(hashes);
        return -1;
    }
    memset(slots, 0xff, capacity * sizeof *slots);
    for (size_t i = 0; i < table->capacity; i++) {
        if (table->slots[i] == PERF_NO_NODE)
            continue;
        size_t j = table->hashes[i] & (capacity - 1);
        while (slots[j] != PERF_NO_NODE)
            j = (j + 1) & (capacity - 1);
        slots[j] = table->slots[i];
        hashes[j] = table->hashes[i];
    }
    free(table->slots);
    free(table->hashes);
    table->slots = slots;
    table->hashes = hashes;
    table->capacity = capacity;
    return 0;
}

/* Finds the entry equal to key; if there is none, records new_index for it.
 * Returns 1 found (*index set), 0 inserted, -1 out of memory. */
static int table_find_or_insert(struct hash_table *table, const struct perf_profile *profile,
                                uint64_t hash, entry_equals equals, const void *key,
                                uint32_t new_index, uint32_t *index)
{
    if ((table->count + 1) * 2 > table->capacity && table_grow(table) != 0)
        return -1;
    size_t mask = table->capacity - 1;
    for (size_t j = hash & mask;; j = (j + 1) & mask) {
        if (table->slots[j] == PERF_NO_NODE) {
            table->slots[j] = new_index;
            table->hashes[j] = hash;
            table->count++;
            *index = new_index;
            return 0;
        }
        if (table->hashes[j] == hash && equals(profile, table->slots[j], key)) {
            *index = table->slots[j];
            return 1;
        }
    }
}

static void table_free(struct hash_table *table)
{
    free(table->slots);
    free(table->hashes);
}

/* ---- interning ---------------------------------------------------------- */

static int frame_equals(const struct perf_profile *profile, uint32_t index, const void *key)
{
    const struct perf_frame *frame = &profile->frames[index];
    const struct pending_frame *pending = key;
    return stored_equals(frame->function, pending->function) &&
           stored_equals(frame->module, pending->module) && stored_equals(frame->file, pending->file);
}

static int add_frame(struct perf_profile *profile, const struct pending_frame *pending)
{
    struct perf_frame *frame = &profile->frames[profile->frame_count];
    frame->function = copy_span(pending->function);
    frame->module = copy_span(pending->module);
    frame->file = copy_span(pending->file);
    frame->line = pending->line;
    frame->inlined = pending->inlined;
    if ((pending->function.length && !frame->function) || (pending->module.length && !frame->module) ||
        (pending->file.length && !frame->file)) {
        free(frame->function);
        free(frame->module);
        free(frame->file);
        return -1;
    }
    profile->frame_count++;
    return 0;
}

/* A frame is a function (in a module and source file), not a line: samples
 * at different lines of one function must add up in a flame graph. Its line
 * is the lowest seen, the nearest to where the function starts. */
static void keep_first_line(struct perf_frame *frame, uint32_t line)
{
    if (line > 0 && (frame->line == 0 || line < frame->line))
        frame->line = line;
}

static int intern_frame(struct parser *parser, const struct pending_frame *pending, uint32_t *index)
{
    struct perf_profile *profile = parser->profile;
    struct perf_index *tables = parser->index;
    if (profile->frame_count >= PERF_NO_NODE - 1)
        return -1;
    if (growable_array_reserve(&profile->frames, &tables->frames_capacity, profile->frame_count + 1,
                               sizeof *profile->frames) != 0)
        return -1;
    uint64_t hash = hash_span(hash_span(hash_span(FNV_OFFSET, pending->function), pending->module),
                              pending->file);
    int found = table_find_or_insert(&tables->frames, profile, hash, frame_equals, pending,
                                     (uint32_t)profile->frame_count, index);
    if (found < 0)
        return -1;
    if (found > 0) {
        keep_first_line(&profile->frames[*index], pending->line);
        return 0;
    }
    /* On failure the table keeps an index past frame_count; the parse stops
     * at the first failure, so nothing looks it up. */
    return add_frame(profile, pending);
}

static int node_equals(const struct perf_profile *profile, uint32_t index, const void *key)
{
    const struct perf_node *node = key;
    return profile->nodes[index].parent == node->parent && profile->nodes[index].frame == node->frame;
}

static int intern_node(struct parser *parser, uint32_t parent, uint32_t frame, uint32_t *index)
{
    struct perf_profile *profile = parser->profile;
    struct perf_index *tables = parser->index;
    if (profile->node_count >= PERF_NO_NODE - 1)
        return -1;
    if (growable_array_reserve(&profile->nodes, &tables->nodes_capacity, profile->node_count + 1,
                               sizeof *profile->nodes) != 0)
        return -1;
    struct perf_node key = {parent, frame};
    uint64_t hash = fnv1a(FNV_OFFSET, &key, sizeof key);
    int found = table_find_or_insert(&tables->nodes, profile, hash, node_equals, &key,
                                     (uint32_t)profile->node_count, index);
    if (found < 0)
        return -1;
    if (found == 0)
        profile->nodes[profile->node_count++] = key;
    return 0;
}

struct thread_key {
    long pid, tid;
};

static int thread_equals(const struct perf_profile *profile, uint32_t index, const void *key)
{
    const struct thread_key *thread = key;
    return profile->threads[index].pid == thread->pid && profile->threads[index].tid == thread->tid;
}

/* The thread keeps the command name of its latest sample: after an exec the
 * name perf shows is the new program's. */
static int rename_thread(struct perf_thread *thread, struct span comm)
{
    if (thread->name && stored_equals(thread->name, comm))
        return 0;
    char *name = copy_span(comm.length ? comm : (struct span){"?", 1});
    if (!name)
        return -1;
    free(thread->name);
    thread->name = name;
    return 0;
}

static int intern_thread(struct parser *parser, long pid, long tid, struct span comm, uint32_t *index)
{
    struct perf_profile *profile = parser->profile;
    struct perf_index *tables = parser->index;
    if (profile->thread_count >= PERF_NO_NODE - 1)
        return -1;
    if (growable_array_reserve(&profile->threads, &tables->threads_capacity, profile->thread_count + 1,
                               sizeof *profile->threads) != 0)
        return -1;
    struct thread_key key = {pid, tid};
    uint64_t hash = fnv1a(FNV_OFFSET, &key, sizeof key);
    int found = table_find_or_insert(&tables->threads, profile, hash, thread_equals, &key,
                                     (uint32_t)profile->thread_count, index);
    if (found < 0)
        return -1;
    if (found == 0) {
        struct perf_thread *thread = &profile->threads[profile->thread_count++];
        memset(thread, 0, sizeof *thread);
        thread->pid = pid;
        thread->tid = tid;
    }
    return rename_thread(&profile->threads[*index], comm);
}

/* ---- one sample --------------------------------------------------------- */

/* Inlined frames carry no module ("(inlined)", or none with srcline); they
 * belong to the module of the real frame at the same address below them.
 * perf sometimes lists an address's inlined frames without its real one:
 * those keep no module rather than borrow the caller's, which may differ. */
static void fill_inlined_modules(struct pending_frame *frames, size_t count)
{
    for (size_t i = count - 1; i-- > 0;) {
        struct pending_frame *frame = &frames[i];
        if (frame->module.length == 0 && frame->inlined && frames[i + 1].ip == frame->ip)
            frame->module = frames[i + 1].module;
    }
}

static int add_sample(struct parser *parser, uint32_t node)
{
    struct perf_profile *profile = parser->profile;
    if (growable_array_reserve(&profile->samples, &parser->index->samples_capacity,
                               profile->sample_count + 1, sizeof *profile->samples) != 0)
        return -1;
    profile->samples[profile->sample_count++] = (struct perf_sample){parser->thread, node};
    profile->threads[parser->thread].samples++;
    return 0;
}

static int finish_sample(struct parser *parser)
{
    if (!parser->in_sample)
        return 0;
    parser->in_sample = 0;
    parser->last_line_had_frame = 0;
    if (parser->depth > 0)
        fill_inlined_modules(parser->pending, parser->depth);
    uint32_t node = PERF_NO_NODE;
    for (size_t i = parser->depth; i-- > 0;) {
        uint32_t frame;
        if (intern_frame(parser, &parser->pending[i], &frame) != 0 ||
            intern_node(parser, node, frame, &node) != 0)
            return -1;
    }
    if (parser->stack_truncated)
        parser->profile->truncated_stacks++;
    return add_sample(parser, node);
}

/* ---- frame lines -------------------------------------------------------- */

/* "sym+0xoff (dso)", "sym (dso)", "sym", "[unknown] ([unknown])",
 * "sym+0x1f (inlined)": the module is the last balanced parenthesised
 * group after a space, so C++ names with parentheses stay whole. */
static void split_module(struct span text, struct span *symbol, struct span *module)
{
    *symbol = text;
    module->length = 0;
    if (text.length < 2 || text.text[text.length - 1] != ')')
        return;
    int depth = 0;
    for (size_t i = text.length; i-- > 0;) {
        char c = text.text[i];
        depth += c == ')' ? 1 : c == '(' ? -1 : 0;
        if (depth != 0)
            continue;
        if (i > 0 && text.text[i - 1] != ' ')
            return; /* "f(int)": the parentheses belong to the symbol */
        *module = (struct span){text.text + i + 1, text.length - i - 2};
        *symbol = trim((struct span){text.text, i});
        return;
    }
}

/* Drops perf's "+0x1f" offset from a symbol. */
static struct span strip_offset(struct span symbol)
{
    for (size_t i = symbol.length; i-- > 0;) {
        if (is_hex(symbol.text[i]))
            continue;
        if (i >= 2 && symbol.text[i] == 'x' && symbol.text[i - 1] == '0' && symbol.text[i - 2] == '+' &&
            i + 1 < symbol.length)
            symbol.length = i - 2;
        break;
    }
    return symbol;
}

static void parse_frame_text(struct span text, uint64_t ip, struct pending_frame *frame)
{
    memset(frame, 0, sizeof *frame);
    frame->ip = ip;
    struct span symbol, module;
    split_module(trim(text), &symbol, &module);
    if (span_equals(module, "inlined")) {
        frame->inlined = 1;
        module.length = 0;
    } else if (span_equals(module, "[unknown]")) {
        module.length = 0;
    }
    symbol = strip_offset(symbol);
    if (span_equals(symbol, "[unknown]"))
        symbol.length = 0;
    frame->function = symbol;
    frame->module = module;
}

static int push_frame(struct parser *parser, struct span text, uint64_t ip)
{
    parser->last_line_had_frame = 1;
    parser->frame_dropped = parser->depth >= PERF_MAX_STACK_DEPTH;
    if (parser->frame_dropped) {
        parser->stack_truncated = 1;
        return 0;
    }
    if (growable_array_reserve(&parser->pending, &parser->pending_capacity, parser->depth + 1,
                               sizeof *parser->pending) != 0)
        return -1;
    parse_frame_text(text, ip, &parser->pending[parser->depth++]);
    return 0;
}

/* A callchain line: a tab, the address in hex, the rest. */
static int try_frame_line(struct parser *parser, struct span line)
{
    if (line.length == 0 || line.text[0] != '\t')
        return 0;
    size_t cursor = 0;
    struct span address;
    if (!next_token(line, &cursor, &address) || !all_hex(address))
        return 0;
    if (!parser->in_sample)
        return 0;
    return push_frame(parser, (struct span){line.text + cursor, line.length - cursor}, parse_hex(address)) == 0
               ? 1 : -1;
}

/* perf's srcline for code without line info: "[kernel.kallsyms][ffffffff8136]"
 * or "libc.so.6+0x27249". */
static int is_address_srcline(struct span text)
{
    if (text.length >= 3 && text.text[text.length - 1] == ']') {
        const char *open = memrchr(text.text, '[', text.length);
        return open && open > text.text &&
               all_hex((struct span){open + 1, (size_t)(text.text + text.length - 1 - open - 1)});
    }
    struct span symbol = strip_offset(text);
    return symbol.length < text.length && !memchr(text.text, ' ', text.length);
}

/* "  file.c:42", "  x.h:7 (inlined)", "  ??:0", "  f.c:3 (discriminator 2)":
 * the source line of the frame just read. */
static int try_srcline_line(struct parser *parser, struct span line)
{
    if (!parser->in_sample || !parser->last_line_had_frame || line.length == 0 || line.text[0] != ' ')
        return 0;
    struct span text = trim(line);
    int inlined = 0;
    if (span_ends_with(text, "(inlined)")) {
        inlined = 1;
        text = trim((struct span){text.text, text.length - strlen("(inlined)")});
    }
    if (text.length > 0 && text.text[text.length - 1] == ')') {
        const char *open = memchr(text.text, '(', text.length);
        if (open && span_ends_with((struct span){open, (size_t)(text.text + text.length - open)}, ")") &&
            strncmp(open, "(discriminator", strlen("(discriminator")) == 0)
            text = trim((struct span){text.text, (size_t)(open - text.text)});
    }
    if (is_address_srcline(text)) {
        parser->last_line_had_frame = 0; /* perf had no line for it */
        return 1;
    }
    const char *colon = NULL;
    for (size_t i = text.length; i-- > 0;)
        if (text.text[i] == ':') {
            colon = text.text + i;
            break;
        }
    if (!colon || !all_digits(colon + 1, (size_t)(text.text + text.length - colon - 1)))
        return 0;
    struct pending_frame dropped, *frame = parser->frame_dropped ? &dropped : &parser->pending[parser->depth - 1];
    struct span file = {text.text, (size_t)(colon - text.text)};
    long number = parse_decimal(colon + 1, (size_t)(text.text + text.length - colon - 1));
    if (file.length > 0 && !span_equals(file, "??")) {
        frame->file = file;
        frame->line = number > (long)UINT32_MAX ? UINT32_MAX : (uint32_t)number;
    }
    frame->inlined |= inlined;
    parser->last_line_had_frame = 0;
    return 1;
}

/* ---- header lines ------------------------------------------------------- */

#define MAX_HEADER_TOKENS 64

static int is_time_token(struct span t)
{
    if (t.length < 4 || t.text[t.length - 1] != ':')
        return 0;
    const char *dot = memchr(t.text, '.', t.length);
    return dot && all_digits(t.text, (size_t)(dot - t.text)) &&
           all_digits(dot + 1, (size_t)(t.text + t.length - 1 - dot - 1));
}

static int is_cpu_token(struct span t)
{
    return t.length >= 3 && t.text[0] == '[' && t.text[t.length - 1] == ']' &&
           all_digits(t.text + 1, t.length - 2);
}

/* "1234" (a thread id alone) or "1234/1235" (pid/tid). */
static int parse_id_token(struct span t, long *pid, long *tid)
{
    const char *slash = memchr(t.text, '/', t.length);
    if (!slash) {
        if (!all_digits(t.text, t.length))
            return 0;
        *pid = -1;
        *tid = parse_decimal(t.text, t.length);
        return 1;
    }
    size_t left = (size_t)(slash - t.text), right = t.length - left - 1;
    if (!all_digits(t.text, left) || !all_digits(slash + 1, right))
        return 0;
    *pid = parse_decimal(t.text, left);
    *tid = parse_decimal(slash + 1, right);
    return 1;
}

struct header {
    struct span comm;
    long pid, tid;
    struct span rest; /* after the event name: an ip, symbol and dso when no callchain */
};

/* Locates the id token: just before the time (and the optional [cpu]) when
 * there is a time, else the first number after the command name that is
 * followed by an event name ("name:"). Returns its token index, or -1. */
static int find_id_token(const struct span *tokens, int count, int *event_search_from)
{
    for (int t = 2; t < count; t++) {
        if (!is_time_token(tokens[t]))
            continue;
        int id = is_cpu_token(tokens[t - 1]) ? t - 2 : t - 1;
        *event_search_from = t + 1;
        return id >= 1 ? id : -1;
    }
    long pid, tid;
    for (int id = 1; id < count; id++) {
        if (!parse_id_token(tokens[id], &pid, &tid))
            continue;
        for (int e = id + 1; e < count; e++)
            if (tokens[e].text[tokens[e].length - 1] == ':') {
                *event_search_from = id + 1;
                return id;
            }
        return -1;
    }
    return -1;
}

static int parse_header(struct span line, struct header *header)
{
    struct span tokens[MAX_HEADER_TOKENS];
    int count = 0;
    size_t cursor = 0;
    while (count < MAX_HEADER_TOKENS && next_token(line, &cursor, &tokens[count]))
        count++;
    int event_from = 0;
    int id = find_id_token(tokens, count, &event_from);
    if (id < 0 || !parse_id_token(tokens[id], &header->pid, &header->tid))
        return 0;
    header->comm = (struct span){tokens[0].text, (size_t)(tokens[id - 1].text + tokens[id - 1].length - tokens[0].text)};
    header->rest.length = 0;
    for (int e = event_from; e < count; e++) {
        if (tokens[e].text[tokens[e].length - 1] != ':' || is_time_token(tokens[e]))
            continue;
        const char *after = tokens[e].text + tokens[e].length;
        header->rest = (struct span){after, (size_t)(line.text + line.length - after)};
        break;
    }
    return 1;
}

static int start_sample(struct parser *parser, const struct header *header)
{
    if (finish_sample(parser) != 0)
        return -1;
    long pid = header->pid < 0 ? header->tid : header->pid;
    if (intern_thread(parser, pid, header->tid, header->comm, &parser->thread) != 0)
        return -1;
    parser->in_sample = 1;
    parser->depth = 0;
    parser->stack_truncated = 0;
    parser->last_line_had_frame = 0;
    /* Without a callchain the sampled ip, symbol and dso end the header. */
    size_t cursor = 0;
    struct span address;
    if (next_token(header->rest, &cursor, &address) && all_hex(address))
        return push_frame(parser, (struct span){header->rest.text + cursor, header->rest.length - cursor},
                          parse_hex(address));
    return 0;
}

/* ---- lines -------------------------------------------------------------- */

static int parse_line(struct parser *parser, struct span line)
{
    if (line.length > 0 && line.text[line.length - 1] == '\r')
        line.length--;
    if (trim(line).length == 0)
        return finish_sample(parser);
    if (line.text[0] == '#')
        return 0;
    int frame = try_frame_line(parser, line);
    if (frame != 0)
        return frame < 0 ? -1 : 0;
    if (try_srcline_line(parser, line))
        return 0;
    struct header header;
    if (parse_header(line, &header))
        return start_sample(parser, &header);
    parser->profile->skipped_lines++;
    parser->last_line_had_frame = 0;
    return 0;
}

int perf_script_parse(const char *text, size_t length, struct perf_profile *profile)
{
    memset(profile, 0, sizeof *profile);
    struct parser *parser = calloc(1, sizeof *parser);
    struct perf_index *index = calloc(1, sizeof *index);
    if (!parser || !index) {
        free(parser);
        free(index);
        errno = ENOMEM;
        return -1;
    }
    profile->index = index;
    parser->profile = profile;
    parser->index = index;
    size_t offset = 0;
    int failed = 0;
    while (!failed && offset < length) {
        const char *end = memchr(text + offset, '\n', length - offset);
        size_t line_length = end ? (size_t)(end - (text + offset)) : length - offset;
        failed = parse_line(parser, (struct span){text + offset, line_length}) != 0;
        offset += line_length + 1;
    }
    if (!failed)
        failed = finish_sample(parser) != 0;
    free(parser->pending);
    free(parser);
    if (failed) {
        perf_profile_free(profile);
        memset(profile, 0, sizeof *profile);
        errno = ENOMEM;
        return -1;
    }
    return 0;
}

void perf_profile_free(struct perf_profile *profile)
{
    for (size_t i = 0; i < profile->frame_count; i++) {
        free(profile->frames[i].function);
        free(profile->frames[i].module);
        free(profile->frames[i].file);
    }
    for (size_t i = 0; i < profile->thread_count; i++)
        free(profile->threads[i].name);
    free(profile->frames);
    free(profile->nodes);
    free(profile->threads);
    free(profile->samples);
    struct perf_index *index = profile->index;
    if (index) {
        table_free(&index->frames);
        table_free(&index->nodes);
        table_free(&index->threads);
        free(index);
    }
    memset(profile, 0, sizeof *profile);
}

const char *perf_frame_display_name(const struct perf_frame *frame, char *buffer, size_t size)
{
    if (frame->function)
        return frame->function;
    if (!frame->module)
        return "[unknown]";
    const char *slash = strrchr(frame->module, '/');
    snprintf(buffer, size, "[%s]", slash && slash[1] ? slash + 1 : frame->module);
    return buffer;
}

static int mentions_any(const char *output, const char *const *phrases)
{
    for (; *phrases; phrases++)
        if (strcasestr(output, *phrases))
            return 1;
    return 0;
}

enum perf_problem perf_classify_output(const char *output, int exit_status)
{
    /* Debian's wrapper: "E: linux-perf-6.1 is not installed."; Ubuntu's:
     * "WARNING: perf not found for kernel 5.15.0-91 ... linux-tools-...". */
    static const char *const version[] = {"not found for kernel", "is not installed",
                                          "linux-tools-", "linux-perf-", NULL};
    static const char *const permission[] = {"perf_event_paranoid", "No permission",
                                             "Permission denied", "not permitted",
                                             "Access to performance monitoring", NULL};
    static const char *const unsupported[] = {"<not supported>", "not supported",
                                              "event syntax error", "<not counted>", NULL};
    if (exit_status == 0)
        return mentions_any(output, unsupported) ? PERF_EVENT_UNSUPPORTED : PERF_OK;
    if (mentions_any(output, version))
        return PERF_VERSION_MISMATCH;
    if (mentions_any(output, permission))
        return PERF_NOT_PERMITTED;
    if (mentions_any(output, unsupported))
        return PERF_EVENT_UNSUPPORTED;
    return PERF_OTHER_FAILURE;
}
