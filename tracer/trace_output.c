/* trace_output.c - see trace_output.h. */
#include "trace_output.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

#include "../common/growable_array.h"
#include "../common/proc_maps.h"
#include "../common/shm_layout.h"
#include "../common/word_map.h"
#include "leak_check.h"
#include "python_frames.h"
#include "recorder.h"
#include "symbols/symbols.h"
#include "trace_writer.h"

/* Frames one frame word expands to (inlined calls make it several): their
 * ids in the trace, first_frame_id << 32 | count, a word_map's value. */
static uint64_t frames_value(uint32_t first_frame_id, uint32_t count)
{
    return (uint64_t)first_frame_id << 32 | count;
}

static uint32_t frames_first(uint64_t value)
{
    return (uint32_t)(value >> 32);
}

static uint32_t frames_count(uint64_t value)
{
    return (uint32_t)value;
}

/* A module written for this image: its id in the trace, by path and build-id. */
struct written_module {
    uint32_t module_id;
    UT_hash_handle hh; /* keyed by the text after the struct: path, NUL, build-id */
    char key[];
};

/* What of an image the trace holds already, so that each output (a
 * checkpoint, or the image's end) writes only what is new or changed. */
struct trace_output_state {
    struct word_map by_address;        /* every frame word written: its frames (frames_value) */
    struct written_module *modules;
    size_t stacks_written;             /* sites [0, stacks_written) have their STACKS */
    int checkpointed;                  /* a checkpoint wrote the image's figures */
    struct trace_site *sites_written;  /* each site's last SITES record (stack_id 0 and no allocation: none) */
    size_t sites_capacity;
    uint8_t *site_written;             /* whether sites_written[i] was written */
    size_t cases_done;                 /* cases [0, cases_done) ended and were written as they end */
    size_t timeline_written;
    size_t leaks_written;
};

struct frame_batch {
    struct trace_frame *frames;
    size_t count, capacity;
};

#define MAX_INLINE_DEPTH 16

static int batch_append(struct frame_batch *batch, const struct trace_frame *frames, size_t count)
{
    if (batch->count + count > batch->capacity) {
        size_t capacity = batch->capacity ? batch->capacity * 2 : 256;
        while (capacity < batch->count + count)
            capacity *= 2;
        struct trace_frame *grown = realloc(batch->frames, capacity * sizeof *grown);
        if (!grown)
            return -1;
        batch->frames = grown;
        batch->capacity = capacity;
    }
    memcpy(batch->frames + batch->count, frames, count * sizeof *frames);
    batch->count += count;
    return 0;
}

/* One frame word into frames: a Python frame from the image's code table,
 * else a return address through the symbolizer. */
static size_t resolve_word(struct symbolizer *symbolizer, const struct python_frames *python, uint64_t word,
                           struct trace_frame *frames)
{
    if (shm_is_python_word(word)) {
        const struct trace_frame *frame = python_frames_find(python, word);
        frames[0] = frame ? *frame
                          : (struct trace_frame){.module_id = TRACE_NONE, .function = "<unknown Python function>",
                                                 .file = "", .address = word, .flags = TRACE_FRAME_PYTHON};
        return 1;
    }
    return symbolizer_resolve(symbolizer, word, 1, frames, MAX_INLINE_DEPTH);
}

/* --- symbols of the sites new since the last output ------------------------------ */

/* New addresses resolved, in batch order, with the ids they will have
 * once written: the writer numbers frames in order from its next id. */
struct new_frames {
    struct frame_batch batch;
    struct word_map by_address; /* frames_value of their ids in the trace */
    uint32_t first_id;          /* the batch's first frame's */
};

/* The stacks of a run of new sites, as STACKS_SHARED records: the frame
 * ids the run's site s lists are ids[starts[s], starts[s + 1]) (records'
 * frame_ids point there once ids stops growing, write_new_stacks). */
struct new_stacks {
    uint32_t *ids;
    size_t count, capacity;
    size_t *starts;
    struct trace_stack *records;
};

static int append_ids(struct new_stacks *stacks, uint64_t value)
{
    uint32_t count = frames_count(value);
    if (growable_array_reserve(&stacks->ids, &stacks->capacity, stacks->count + count, sizeof *stacks->ids) < 0)
        return -1;
    for (uint32_t k = 0; k < count; k++)
        stacks->ids[stacks->count++] = frames_first(value) + k;
    return 0;
}

/* The frames one word of a new stack expands to: from an earlier output,
 * from this one, or resolved now and added to the batch. */
static int frames_of_word(struct symbolizer *symbolizer, const struct trace_image *image,
                          const struct trace_output_state *state, struct new_frames *found, uint64_t word,
                          uint64_t *value)
{
    const uint64_t *known = state->by_address.count ? word_map_find(&state->by_address, word) : NULL;
    if (!known)
        known = word_map_find(&found->by_address, word);
    if (known) {
        *value = *known;
        return 0;
    }
    struct trace_frame frames[MAX_INLINE_DEPTH];
    size_t count = resolve_word(symbolizer, image->python, word, frames);
    *value = frames_value(found->first_id + (uint32_t)found->batch.count, (uint32_t)count);
    return batch_append(&found->batch, frames, count) < 0 || word_map_put(&found->by_address, word, *value) < 0
               ? -1
               : 0;
}

/* The frame values of the previous new site, outermost first: consecutive
 * sites mostly share their outer frames (one import, one loop), and a word
 * equal to the previous site's at the same distance from the outermost
 * frame, with all the words outside it equal too, needs no lookup. */
struct outer_frames {
    uint64_t *words, *values;
    uint32_t count;
    size_t words_capacity, values_capacity;
};

/* Fills outer with the frame values of site, outermost first; *shared:
 * how many of its outermost words it has in common with the site before. */
static int frame_values(struct symbolizer *symbolizer, const struct trace_image *image,
                        const struct trace_output_state *state, struct new_frames *found,
                        const struct recorder_site *site, struct outer_frames *outer, uint32_t *shared_words)
{
    if (growable_array_reserve(&outer->words, &outer->words_capacity, site->depth, sizeof *outer->words) < 0 ||
        growable_array_reserve(&outer->values, &outer->values_capacity, site->depth, sizeof *outer->values) < 0)
        return -1;
    uint32_t shared = 0;
    while (shared < site->depth && shared < outer->count &&
           outer->words[shared] == recorder_site_frame(site, site->depth - 1 - shared))
        shared++;
    for (uint32_t k = shared; k < site->depth; k++) {
        outer->words[k] = recorder_site_frame(site, site->depth - 1 - k);
        if (frames_of_word(symbolizer, image, state, found, outer->words[k], &outer->values[k]) < 0)
            return -1;
    }
    outer->count = site->depth;
    *shared_words = shared;
    return 0;
}

/* A STACKS_SHARED section holds the stacks of a run of new sites whose
 * frames reach this many (or the sites run out): what is laid out and
 * the section being written stay a few MiB however many sites an image
 * has (a Python program that imports every module has 700,000, of 44
 * frames each). */
#define STACKS_SECTION_FRAMES (1u << 20)

/* The end of the run of new sites from first on. */
static size_t run_end(const struct recorder *recorder, size_t first)
{
    size_t end = first;
    uint64_t frames = 0;
    while (end < recorder->site_count && frames < STACKS_SECTION_FRAMES)
        frames += recorder->sites[end++].depth;
    return end;
}

/* A site to sort: where its frames are, so that the sort reads them and
 * not the sites. */
struct sort_item {
    const uint64_t *frames, *tail;
    uint32_t depth, tail_count, site;
};

/* Frame k from the outermost (k 0), 0 past the innermost: no frame word is
 * 0 (a return address, or a tagged Python word), so a stack sorts before
 * the longer ones it is the outer part of. */
static inline uint64_t outer_frame(const struct sort_item *item, uint32_t k)
{
    if (k < item->tail_count)
        return item->tail[item->tail_count - 1 - k];
    return k < item->depth ? item->frames[item->depth - 1 - k] : 0;
}

static inline void swap_items(struct sort_item *items, size_t i, size_t j)
{
    struct sort_item kept = items[i];
    items[i] = items[j];
    items[j] = kept;
}

/* Sorts items[0, count) by their frames read from the outermost, all of
 * which agree before frame k: the order in which each stack shares the
 * most outer frames with the one before it, what STACKS_SHARED and
 * frame_values make use of. Multikey quicksort (Bentley and Sedgewick):
 * stacks share long outer parts, which a comparison sort would compare
 * again at every comparison. Of the three parts a partition leaves, the
 * largest is sorted by the loop and the others, each at most half, by
 * recursion: about log2(count) deep at most, whatever the frames. */
static void sort_outermost_first(struct sort_item *items, size_t count, uint32_t k)
{
    while (count > 1) {
        uint64_t pivot = outer_frame(&items[count / 2], k);
        /* [0, less) < pivot, [less, greater) == pivot, [greater, count) > pivot */
        size_t less = 0, i = 0, greater = count;
        while (i < greater) {
            uint64_t key = outer_frame(&items[i], k);
            if (key < pivot)
                swap_items(items, less++, i++);
            else if (key > pivot)
                swap_items(items, i, --greater);
            else
                i++;
        }
        /* the equal part needs no more sorting once its stacks ended */
        struct {
            struct sort_item *items;
            size_t count;
            uint32_t k;
        } parts[3] = {{items, less, k}, {items + less, pivot ? greater - less : 0, k + 1},
                      {items + greater, count - greater, k}};
        int largest = 0;
        for (int p = 1; p < 3; p++)
            if (parts[p].count > parts[largest].count)
                largest = p;
        for (int p = 0; p < 3; p++)
            if (p != largest)
                sort_outermost_first(parts[p].items, parts[p].count, parts[p].k);
        items = parts[largest].items;
        count = parts[largest].count;
        k = parts[largest].k;
    }
}

/* items[0, end - first): the sites [first, end) sorted by their frames
 * from the outermost. */
static void order_outermost_first(const struct recorder *recorder, size_t first, size_t end,
                                  struct sort_item *items)
{
    for (size_t s = first; s < end; s++) {
        const struct recorder_site *site = &recorder->sites[s];
        items[s - first] = (struct sort_item){site->frames, site->tail, site->depth, site->tail_count, (uint32_t)s};
    }
    sort_outermost_first(items, end - first, 0);
}

/* Resolves every frame word of the sites of items[0, count) that the trace
 * does not have yet, and lays out the frame ids of their stacks in that
 * order, each without the outermost ones it shares with the one before:
 * each word is looked up at most once, and the outer words a site shares
 * with the one before it not at all. -1 when out of memory. */
static int resolve_new(struct symbolizer *symbolizer, const struct trace_image *image,
                       const struct trace_output_state *state, struct new_frames *found, struct new_stacks *stacks,
                       struct outer_frames *outer, const struct sort_item *items, size_t count)
{
    const struct recorder *recorder = image->recorder;
    int rc = 0;
    stacks->count = 0;
    for (size_t i = 0; rc == 0 && i < count; i++) {
        const struct recorder_site *site = &recorder->sites[items[i].site];
        uint32_t shared_words = 0, shared_ids = 0, ids = 0;
        stacks->starts[i] = stacks->count;
        rc = frame_values(symbolizer, image, state, found, site, outer, &shared_words);
        if (i == 0)
            shared_words = 0; /* the run's first stack is the first of its section */
        for (uint32_t k = 0; rc == 0 && k < site->depth; k++) {
            ids += frames_count(outer->values[k]);
            if (k < shared_words)
                shared_ids = ids;
        }
        for (uint32_t k = site->depth; rc == 0 && k-- > shared_words;)
            rc = append_ids(stacks, outer->values[k]); /* innermost first */
        stacks->records[i] = (struct trace_stack){.stack_id = site->stack_id, .depth = ids, .shared = shared_ids};
    }
    stacks->starts[count] = stacks->count;
    return rc;
}

/* The trace's id of a symbolizer module, written now if it is new. */
static int module_id_in_trace(struct trace_writer *writer, struct trace_output_state *state,
                              const struct trace_module *module, uint32_t *module_base, uint32_t *id)
{
    size_t path_length = strlen(module->path), build_length = strlen(module->build_id);
    size_t key_length = path_length + 1 + build_length;
    struct written_module *written;
    char *key = malloc(key_length + 1);
    if (!key)
        return -1;
    memcpy(key, module->path, path_length + 1);
    memcpy(key + path_length + 1, module->build_id, build_length + 1);
    HASH_FIND(hh, state->modules, key, key_length, written);
    if (!written) {
        struct trace_module record = *module;
        record.module_id = *module_base;
        if (!(written = malloc(sizeof *written + key_length + 1)) || trace_write_module(writer, &record) < 0) {
            free(written);
            free(key);
            return -1;
        }
        written->module_id = (*module_base)++;
        memcpy(written->key, key, key_length + 1);
        HASH_ADD_KEYPTR(hh, state->modules, written->key, key_length, written);
    }
    free(key);
    *id = written->module_id;
    return 0;
}

/* MODULE sections for the modules the new frames name, their module ids
 * turned into the trace's. */
static int write_new_modules(struct trace_writer *writer, struct symbolizer *symbolizer,
                             struct trace_output_state *state, struct frame_batch *batch, uint32_t *module_base)
{
    size_t count = 0;
    const struct trace_module *modules = symbolizer_modules(symbolizer, &count);
    uint32_t *ids = calloc(count + 1, sizeof *ids);
    if (!ids)
        return -1;
    uint8_t *used = calloc(count + 1, 1);
    int rc = used ? 0 : -1;
    for (size_t i = 0; rc == 0 && i < batch->count; i++)
        if (batch->frames[i].module_id < count)
            used[batch->frames[i].module_id] = 1;
    for (size_t m = 0; rc == 0 && m < count; m++)
        if (used[m])
            rc = module_id_in_trace(writer, state, &modules[m], module_base, &ids[m]);
    for (size_t i = 0; rc == 0 && i < batch->count; i++)
        if (batch->frames[i].module_id < count)
            batch->frames[i].module_id = ids[batch->frames[i].module_id];
    free(used);
    free(ids);
    return rc;
}

/* STACKS_SHARED for the count records resolve_new laid out. */
static int write_new_stacks(struct trace_writer *writer, const struct trace_image *image, size_t count,
                            struct new_stacks *laid_out)
{
    if (!count)
        return 0;
    for (size_t s = 0; s < count; s++)
        laid_out->records[s].frame_ids = laid_out->ids + laid_out->starts[s];
    return trace_write_stacks(writer, image->process_id, laid_out->records, (uint32_t)count);
}

/* The modules and frames a run of new sites names that the trace does not
 * have yet, then the run's stacks. The frames' ids are the writer's next
 * ones, as resolve_new numbered them. */
static int write_new_run(struct trace_writer *writer, struct symbolizer *symbolizer, const struct trace_image *image,
                         struct trace_output_state *state, struct new_frames *found, struct new_stacks *laid_out,
                         size_t count, uint32_t *module_base)
{
    uint32_t first_id = 0;
    if (write_new_modules(writer, symbolizer, state, &found->batch, module_base) < 0)
        return -1;
    if (found->batch.count &&
        (trace_write_frames(writer, found->batch.frames, (uint32_t)found->batch.count, &first_id) < 0 ||
         first_id != found->first_id))
        return -1; /* the ids laid out are not the frames' (a write in between): nothing more is written */
    return write_new_stacks(writer, image, count, laid_out);
}

/* The end of at most max_runs runs of sites from first on (0: all). */
static size_t runs_end(const struct recorder *recorder, size_t first, size_t max_runs)
{
    if (!max_runs)
        return recorder->site_count;
    size_t end = first;
    for (size_t run = 0; run < max_runs && end < recorder->site_count; run++)
        end = run_end(recorder, end);
    return end;
}

/* Modules, frames and stacks of the sites new since the last output, in
 * runs of about STACKS_SECTION_FRAMES frames, each sorted by its frames
 * from the outermost (at most max_runs of them; 0: all); the new frames'
 * ids are kept for the image's next output unless this is its last
 * (keep_frames 0). */
static int write_new_symbols(struct trace_writer *writer, struct symbol_store *symbols,
                             const struct trace_image *image, struct trace_output_state *state,
                             uint32_t *module_base, int keep_frames, size_t max_runs)
{
    const struct recorder *recorder = image->recorder;
    if (state->stacks_written == recorder->site_count)
        return 0;
    struct symbolizer *symbolizer = symbolizer_create(symbols, image->maps);
    struct new_frames found = {{0}, {0}, 0};
    struct new_stacks stacks = {0};
    struct outer_frames outer = {0};
    size_t last = runs_end(recorder, state->stacks_written, max_runs), most = last - state->stacks_written;
    struct sort_item *items = malloc(most * sizeof *items);
    stacks.starts = malloc((most + 1) * sizeof *stacks.starts);
    stacks.records = malloc(most * sizeof *stacks.records);
    int rc = symbolizer && items && stacks.starts && stacks.records ? 0 : -1;
    while (rc == 0 && state->stacks_written < last) {
        size_t first = state->stacks_written, end = run_end(recorder, first), count = end - first;
        order_outermost_first(recorder, first, end, items);
        found.batch.count = 0;
        found.first_id = trace_writer_next_frame_id(writer);
        if (resolve_new(symbolizer, image, state, &found, &stacks, &outer, items, count) < 0 ||
            write_new_run(writer, symbolizer, image, state, &found, &stacks, count, module_base) < 0)
            rc = -1;
        else
            state->stacks_written = end;
    }
    size_t position = 0;
    uint64_t word, value;
    while (rc == 0 && keep_frames && word_map_next(&found.by_address, &position, &word, &value))
        if (word_map_put(&state->by_address, word, value) < 0)
            rc = -1;
    word_map_free(&found.by_address);
    free(found.batch.frames);
    free(stacks.ids);
    free(stacks.starts);
    free(stacks.records);
    free(outer.words);
    free(outer.values);
    free(items);
    if (symbolizer)
        symbolizer_destroy(symbolizer);
    return rc;
}

/* --- figures ------------------------------------------------------------------------ */

static int site_record_equal(const struct trace_site *a, const struct trace_site *b)
{
    return a->stack_id == b->stack_id && a->allocations == b->allocations &&
           a->allocated_bytes == b->allocated_bytes && a->frees == b->frees && a->live_bytes == b->live_bytes &&
           a->live_blocks == b->live_blocks && a->peak_live_bytes == b->peak_live_bytes &&
           a->max_live_bytes == b->max_live_bytes;
}

static int remember_capacity(struct trace_output_state *state, size_t site_count)
{
    if (site_count <= state->sites_capacity)
        return 0;
    size_t capacity = state->sites_capacity ? state->sites_capacity : 64;
    while (capacity < site_count)
        capacity *= 2;
    struct trace_site *sites = realloc(state->sites_written, capacity * sizeof *sites);
    if (!sites)
        return -1;
    state->sites_written = sites;
    uint8_t *written = realloc(state->site_written, capacity);
    if (!written)
        return -1;
    memset(written + state->sites_capacity, 0, capacity - state->sites_capacity);
    state->site_written = written;
    state->sites_capacity = capacity;
    return 0;
}

/* A SITES section holds at most this many records: the records' buffer
 * (64 KiB) is written over again for each section, not grown to the
 * image's sites. Each new page the tracer writes costs a fault (about
 * 12 us on this project's VM): a buffer sized for 65,536 records was
 * 160 new pages for python3 -c pass's 10,000 sites, 2 ms of its end. */
#define SITES_SECTION_RECORDS 1024u

/* The SITES record of a site as it stands. */
static struct trace_site site_record(const struct recorder *recorder, const struct recorder_site *site)
{
    uint64_t at_peak = site->peak_epoch == recorder->peak_epoch ? site->peak_live_bytes : site->live_bytes;
    return (struct trace_site){
        .stack_id = site->stack_id,
        .allocations = site->allocations,
        .allocated_bytes = site->allocated_bytes,
        .frees = site->frees,
        .live_bytes = site->live_bytes,
        .live_blocks = site->live_blocks,
        .peak_live_bytes = at_peak,
        .max_live_bytes = site->max_live_bytes,
    };
}

/* Writes records[0, count) (of sites indexes[0, count)) as one SITES
 * section and, unless last, remembers them as written. */
static int write_site_records(struct trace_writer *writer, const struct trace_image *image,
                              struct trace_output_state *state, const struct trace_site *records,
                              const size_t *indexes, uint32_t count, int last)
{
    if (!count)
        return 0;
    if (trace_write_sites(writer, image->process_id, records, count) < 0)
        return -1;
    for (uint32_t i = 0; !last && i < count; i++) {
        state->sites_written[indexes[i]] = records[i];
        state->site_written[indexes[i]] = 1;
    }
    return 0;
}

/* SITES: every shown site whose totals differ from what the trace has (a
 * later record for a stack replaces the earlier), in sections of at most
 * SITES_SECTION_RECORDS. What was written is remembered for the image's
 * next output, unless this is its last. */
static int write_sites(struct trace_writer *writer, const struct trace_image *image,
                       struct trace_output_state *state, int last)
{
    const struct recorder *recorder = image->recorder;
    if (!last && remember_capacity(state, recorder->site_count) < 0)
        return -1;
    struct trace_site *records = malloc(SITES_SECTION_RECORDS * sizeof *records);
    size_t *indexes = malloc(SITES_SECTION_RECORDS * sizeof *indexes);
    int rc = records && indexes ? 0 : -1;
    uint32_t count = 0;
    for (size_t s = 0; rc == 0 && s < recorder->site_count; s++) {
        const struct recorder_site *site = &recorder->sites[s];
        if (!recorder_site_shown(site))
            continue;
        struct trace_site record = site_record(recorder, site);
        if (s < state->sites_capacity && state->site_written[s] &&
            site_record_equal(&state->sites_written[s], &record))
            continue;
        records[count] = record;
        indexes[count++] = s;
        if (count == SITES_SECTION_RECORDS) {
            rc = write_site_records(writer, image, state, records, indexes, count, last);
            count = 0;
        }
    }
    if (rc == 0)
        rc = write_site_records(writer, image, state, records, indexes, count, last);
    free(records);
    free(indexes);
    return rc;
}

static int compare_counter_keys(const void *left, const void *right)
{
    const struct case_site_counter *a = *(const struct case_site_counter *const *)left;
    const struct case_site_counter *b = *(const struct case_site_counter *const *)right;
    return a->key < b->key ? -1 : a->key > b->key;
}

/* The case counters that changed since the trace last had them, sorted by
 * case then site: each case's share is one run of them (a case looking
 * through every case's counters made a recording of 20,000 cases spend
 * 4 s here). *count 0 and NULL when none changed, or out of memory. */
static struct case_site_counter **changed_counters(const struct recorder *recorder, size_t *count)
{
    size_t n = 0;
    for (const struct case_site_counter *c = recorder->case_sites; c; c = c->hh.next)
        n += c->changed != 0;
    struct case_site_counter **sorted = n ? malloc(n * sizeof *sorted) : NULL;
    *count = 0;
    for (struct case_site_counter *c = recorder->case_sites; sorted && c; c = c->hh.next)
        if (c->changed)
            sorted[(*count)++] = c;
    if (sorted)
        qsort(sorted, *count, sizeof *sorted, compare_counter_keys);
    return sorted;
}

/* One case's changed counters: counters[0..count), all of case_id. */
static int write_case_sites(struct trace_writer *writer, const struct trace_image *image, uint32_t case_id,
                            struct case_site_counter *const *counters, size_t count)
{
    const struct recorder *recorder = image->recorder;
    if (!count)
        return 0;
    struct trace_case_site *sites = calloc(count, sizeof *sites);
    if (!sites)
        return -1;
    size_t n = 0;
    for (size_t i = 0; i < count; i++) {
        const struct case_site_counter *c = counters[i];
        size_t site_index = (uint32_t)c->key;
        if (site_index >= recorder->site_count || !recorder_site_shown(&recorder->sites[site_index]))
            continue;
        sites[n++] = (struct trace_case_site){recorder->sites[site_index].stack_id, c->allocations,
                                             c->allocated_bytes, c->frees};
    }
    struct trace_case_sites record = {image->process_id, case_id, (uint32_t)n, sites};
    int rc = n ? trace_write_case_sites(writer, &record) : 0;
    free(sites);
    for (size_t i = 0; rc == 0 && i < count; i++)
        counters[i]->changed = 0;
    return rc;
}

/* CASE for every case not yet written as it ended (an open one ends, for
 * now, at until_ns), then the counters that changed, case by case. */
static int write_cases(struct trace_writer *writer, const struct trace_image *image,
                       struct trace_output_state *state, uint64_t until_ns)
{
    const struct recorder *recorder = image->recorder;
    int rc = 0;
    for (size_t i = state->cases_done; rc == 0 && i < recorder->case_count; i++) {
        struct trace_case c = recorder->cases[i].info;
        c.process_id = image->process_id;
        if (!c.end_ns)
            c.end_ns = until_ns;
        rc = trace_write_case(writer, &c);
        if (rc == 0 && i == state->cases_done && (recorder->cases[i].info.flags & TRACE_CASE_ENDED))
            state->cases_done++; /* it will not change any more */
    }
    size_t count, next = 0;
    struct case_site_counter **counters = changed_counters(recorder, &count);
    while (rc == 0 && next < count) {
        uint32_t case_id = (uint32_t)(counters[next]->key >> 32);
        size_t first = next;
        while (next < count && (uint32_t)(counters[next]->key >> 32) == case_id)
            next++;
        rc = write_case_sites(writer, image, case_id, counters + first, next - first);
    }
    free(counters);
    return rc < 0 ? -1 : 0;
}

/* The snapshots, timeline points and leak checks the trace has not got. */
static int write_history(struct trace_writer *writer, const struct trace_image *image,
                         struct trace_output_state *state)
{
    struct recorder *recorder = image->recorder;
    for (size_t i = 0; i < recorder->snapshot_count; i++) {
        struct recorder_snapshot *kept = &recorder->snapshots[i];
        if (kept->written)
            continue;
        struct trace_snapshot snapshot = kept->header;
        snapshot.process_id = image->process_id;
        if (trace_write_snapshot_delta(writer, &snapshot) < 0)
            return -1;
        kept->written = 1;
    }
    if (recorder->timeline_count > state->timeline_written) {
        if (trace_write_timeline(writer, image->process_id, recorder->interval_ns,
                                 recorder->timeline + state->timeline_written,
                                 (uint32_t)(recorder->timeline_count - state->timeline_written)) < 0)
            return -1;
        state->timeline_written = recorder->timeline_count;
    }
    for (; state->leaks_written < image->leaks->count; state->leaks_written++) {
        struct trace_leaks leaks = image->leaks->checks[state->leaks_written];
        leaks.process_id = image->process_id;
        if (trace_write_leaks(writer, &leaks) < 0)
            return -1;
    }
    return 0;
}

/* The interpreter the image ran, and how its objects reached the trace. */
static int write_python(struct trace_writer *writer, const struct trace_image *image)
{
    const struct python_frames *python = image->python;
    if (!python->version)
        return 0;
    static const uint32_t allocator_of_mode[] = {
        [SHM_PYTHON_HOOKED] = TRACE_PYTHON_WRAPPED,
        [SHM_PYTHON_MALLOC] = TRACE_PYTHON_MALLOC,
        [SHM_PYTHON_USER_ALLOCATOR] = TRACE_PYTHON_UNRECORDED,
        [SHM_PYTHON_NOT_WRAPPED] = TRACE_PYTHON_NOT_WRAPPED,
    };
    struct trace_python record = {
        .process_id = image->process_id,
        .version = python->version,
        .allocator = python->mode < sizeof allocator_of_mode / sizeof *allocator_of_mode
                         ? allocator_of_mode[python->mode]
                         : 0,
        .flags = python->frames_read ? TRACE_PYTHON_FRAMES : 0,
        .unnamed_functions = python->codes_dropped,
    };
    return trace_write_python(writer, &record);
}

/* What the image's Python recording could not do, and why. */
static int write_python_warnings(struct trace_writer *writer, const struct trace_image *image)
{
    const struct python_frames *python = image->python;
    if (!python->version)
        return 0;
    char version[32], message[512];
    python_version_text(python->version, version, sizeof version);
    int rc = 0;
    if (python->mode == SHM_PYTHON_USER_ALLOCATOR) {
        snprintf(message, sizeof message,
                 "Python %s runs the allocator the user chose (PYTHONMALLOC or -X dev): objects it serves from "
                 "pymalloc are not recorded; leave PYTHONMALLOC unset (or set PYTHONMALLOC=malloc) to record them",
                 version);
        rc |= trace_write_warning(writer, image->process_id, message);
    }
    if (python->mode == SHM_PYTHON_NOT_WRAPPED) {
        snprintf(message, sizeof message,
                 "Python %s: memslope wraps the object allocator of CPython 3.7 and later only: objects it serves "
                 "from pymalloc are not recorded (PYTHONMALLOC=malloc, from 3.6 on, has them recorded as malloc)",
                 version);
        rc |= trace_write_warning(writer, image->process_id, message);
    }
    if (!python->frames_read) {
        snprintf(message, sizeof message,
                 "Python %s: its frames are not read (memslope reads CPython 3.6 to 3.13, not a free-threaded "
                 "build): stacks show the interpreter's C frames only",
                 version);
        rc |= trace_write_warning(writer, image->process_id, message);
    }
    if (python->codes_dropped) {
        snprintf(message, sizeof message,
                 "%u Python functions have no name: the shared code table was full", python->codes_dropped);
        rc |= trace_write_warning(writer, image->process_id, message);
    }
    return rc;
}

/* Why the shim never ran in an image, as far as the tracer can tell. */
static void shim_absent_reason(const struct trace_image *image, char *reason, size_t size)
{
    if (image->secure_execution)
        snprintf(reason, size, "it runs in secure-execution mode, setuid, setgid or with file capabilities, where "
                               "the dynamic loader ignores LD_PRELOAD; record it without those, or as the user it "
                               "runs as");
    else if (image->statically_linked)
        snprintf(reason, size, "a statically linked program: no dynamic loader preloads anything into it");
    else if (image->preload == TRACE_PRELOAD_WITHOUT_SHIM && image->preload_value && *image->preload_value)
        snprintf(reason, size,
                 "a command on the way (env LD_PRELOAD=..., a wrapper) replaced its LD_PRELOAD with '%s%s'; set it "
                 "before memslope instead (LD_PRELOAD=... memslope record -- ...), and memslope adds its shim to it",
                 image->preload_value, strlen(image->preload_value) >= TRACE_PRELOAD_VALUE_MAX ? "..." : "");
    else if (image->preload == TRACE_PRELOAD_WITHOUT_SHIM)
        snprintf(reason, size, "a command on the way (env LD_PRELOAD=, a wrapper) emptied its LD_PRELOAD, which "
                               "held memslope's shim");
    else if (image->preload == TRACE_PRELOAD_UNSET)
        snprintf(reason, size, "a command on the way (env -i, env -u, a wrapper that cleans the environment) "
                               "removed LD_PRELOAD, which holds memslope's shim, from its environment");
    else if (image->preload == TRACE_PRELOAD_WITH_SHIM)
        snprintf(reason, size, "its LD_PRELOAD names the shim, but the dynamic loader did not load it; see the "
                               "program's own error output");
    else
        snprintf(reason, size, "LD_PRELOAD was removed from its environment, or the shim could not be loaded");
}

int trace_image_shim_absent(const struct trace_image *image, char *message, size_t size)
{
    /* let go of young: its shim may not have loaded yet */
    if ((image->flags & (TRACE_PROC_SHIM_SEEN | TRACE_PROC_LET_GO)) || image->vfork_child || image->raw_fork_child)
        return 0;
    char reason[400];
    shim_absent_reason(image, reason, sizeof reason);
    snprintf(message, size, "process %d (%s): the shim never loaded, so its allocations are not recorded: %s",
             (int)image->pid, image->exe ? image->exe : "?", reason);
    return 1;
}

/* Whether the image left past exit() and the interposed _exit() (where the
 * shim runs freeres): an exit_group system call of its own, or glibc's
 * internal _exit (quick_exit, daemon's parent), where memcheck runs it.
 * Only an image whose own region was found: without one (a child made
 * past glibc's fork, whose shim is still its parent's) no outcome was
 * written to tell. */
static bool left_by_raw_exit_group(const struct trace_image *image)
{
    uint32_t ended_otherwise = TRACE_PROC_SIGNALED | TRACE_PROC_EXECED | TRACE_PROC_LET_GO | TRACE_PROC_CHECKPOINT;
    return (image->flags & TRACE_PROC_EXITED) && image->region_found && !(image->flags & ended_otherwise) &&
           !image->vfork_child && !image->freeres_off;
}

/* Why the image's figures differ from memcheck's, which always runs
 * glibc's and libstdc++'s freeres at the end (it kills the other threads
 * first): false when freeres ran or was never due. */
static bool freeres_skipped(const struct trace_image *image, char *message, size_t size)
{
    const char *what = "glibc's freeres did not run at exit";
    const char *compare = "What the C and C++ runtimes keep for the life of the process stays allocated (still "
                          "reachable), where memcheck frees it; compare with valgrind --run-libc-freeres=no "
                          "--run-cxx-freeres=no, or record with --no-freeres";
    uint32_t others = image->freeres_other_threads;
    switch (image->freeres_outcome) {
    case SHM_FREERES_OTHER_THREADS:
        snprintf(message, size, "%s: %u other thread%s still ran and could still use what it frees. %s", what,
                 others, others == 1 ? "" : "s", compare);
        return true;
    case SHM_FREERES_SIGNAL_HANDLER:
        snprintf(message, size,
                 "%s: the process may have ended from a signal handler (a signal it catches was blocked), which "
                 "could have interrupted malloc. %s", what, compare);
        return true;
    case SHM_FREERES_THREADS_UNKNOWN:
        snprintf(message, size,
                 "%s: its threads could not be counted (/proc/self/task was unreadable), and another could still "
                 "use what it frees. %s", what, compare);
        return true;
    case SHM_FREERES_NOT_REACHED:
        if (!left_by_raw_exit_group(image))
            return false;
        snprintf(message, size, "%s: the process left past the exit() and _exit() memslope's shim sees (an "
                 "exit_group system call of its own, quick_exit(), or the parent side of daemon()). %s", what,
                 compare);
        return true;
    default:
        return false;
    }
}

static int write_warnings(struct trace_writer *writer, const struct trace_image *image)
{
    char message[1024];
    const struct recorder *recorder = image->recorder;
    int rc = 0;
    if (trace_image_shim_absent(image, message, sizeof message))
        rc |= trace_write_warning(writer, image->process_id, message);
    if (image->stacks_dropped) {
        snprintf(message, sizeof message, "%u allocations have no backtrace: the stack table was full",
                 image->stacks_dropped);
        rc |= trace_write_warning(writer, image->process_id, message);
    }
    if (image->slots_exhausted) {
        snprintf(message, sizeof message,
                 "%u threads found no free ring slot: their allocations were not recorded", image->slots_exhausted);
        rc |= trace_write_warning(writer, image->process_id, message);
    }
    if (image->raw_fork_child) {
        snprintf(message, sizeof message,
                 "process %d was made by a fork or clone system call of the program's own, not by glibc's fork() "
                 "(or descends from such a process): no fork handler ran in it, so its shim could not start a "
                 "recording of its own, and its allocations are not recorded (nor checked for leaks)%s",
                 (int)image->pid,
                 image->raw_fork_child == 2 ? "; memslope could not stop its shim from writing into its parent's "
                                              "recording, whose figures may hold some of the child's events"
                                            : "");
        rc |= trace_write_warning(writer, image->process_id, message);
    }
    if (freeres_skipped(image, message, sizeof message))
        rc |= trace_write_warning(writer, image->process_id, message);
    if (image->invalid_events) {
        snprintf(message, sizeof message,
                 "%llu events in the shared memory of process %d were not valid and were skipped: the program "
                 "wrote over memslope's region (a buffer overrun?); its figures may be incomplete",
                 (unsigned long long)image->invalid_events, (int)image->pid);
        rc |= trace_write_warning(writer, image->process_id, message);
    }
    rc |= write_python(writer, image);
    rc |= write_python_warnings(writer, image);
    if (recorder->out_of_memory)
        rc |= trace_write_warning(writer, image->process_id,
                                  "memslope ran out of memory while recording: figures are incomplete");
    if (image->leak_check_note)
        rc |= trace_write_warning(writer, image->process_id, image->leak_check_note);
    return rc;
}

static int write_process_record(struct trace_writer *writer, const struct trace_image *image)
{
    const struct recorder *recorder = image->recorder;
    struct trace_process record = {
        .process_id = image->process_id,
        .pid = (uint32_t)image->pid,
        .parent_process_id = image->parent_process_id,
        .exe = image->exe ? image->exe : "",
        .argc = image->argc,
        .argv = image->argv,
        .start_ns = image->start_ns,
        .end_ns = image->end_ns,
        .flags = image->flags,
        .exit_status = image->exit_status,
        .exit_signal = image->exit_signal,
        .allocations = recorder->allocations,
        .frees = recorder->frees,
        .allocated_bytes = recorder->allocated_bytes,
        .peak_bytes = recorder->peak_bytes,
        .peak_blocks = recorder->peak_blocks,
        .peak_time_ns = recorder->peak_time_ns,
        .live_bytes = recorder->live_bytes,
        .live_blocks = recorder->live_blocks,
        .stacks_dropped = image->stacks_dropped,
        .slots_exhausted = image->slots_exhausted,
    };
    return trace_write_process(writer, &record);
}

/* What of the image the trace holds, made empty by its first output;
 * NULL when out of memory. */
static struct trace_output_state *output_state(const struct trace_image *image)
{
    if (!*image->output)
        *image->output = calloc(1, sizeof **image->output);
    return *image->output;
}

/* The image's PROCESS record as it stands at now_ns, still running (flag
 * TRACE_PROC_CHECKPOINT): its figures until then, and its PYTHON record
 * once the shim found the interpreter (a killed trace's report then speaks
 * of Python; the record at the end replaces it). */
static int write_process_record_at(struct trace_writer *writer, const struct trace_image *image, uint64_t now_ns)
{
    struct trace_image as_now = *image;
    as_now.flags |= TRACE_PROC_CHECKPOINT;
    as_now.end_ns = now_ns;
    if (write_process_record(writer, &as_now) < 0)
        return -1;
    /* the shim publishes the version before the mode: not half of it */
    return image->python->mode != SHM_PYTHON_NONE && write_python(writer, image) < 0 ? -1 : 0;
}

/* What changed in the image since its last output, after its PROCESS
 * record (written first, so that a trace cut inside this output still
 * names the image). */
static int write_changes(struct trace_writer *writer, struct symbol_store *symbols, const struct trace_image *image,
                         uint32_t *module_base, uint64_t until_ns, int last)
{
    struct trace_output_state *state = output_state(image);
    if (!state)
        return -1;
    if (write_new_symbols(writer, symbols, image, state, module_base, !last, 0) < 0 ||
        write_sites(writer, image, state, last) < 0 ||
        write_cases(writer, image, state, until_ns) < 0 || write_history(writer, image, state) < 0)
        return -1;
    return 0;
}

int trace_output_checkpoint(struct trace_writer *writer, struct symbol_store *symbols, const struct trace_image *image,
                            uint32_t *module_base, uint64_t now_ns)
{
    if (write_process_record_at(writer, image, now_ns) < 0 ||
        write_changes(writer, symbols, image, module_base, now_ns, 0) < 0)
        return -1;
    (*image->output)->checkpointed = 1;
    return 0;
}

int trace_output_process(struct trace_writer *writer, struct symbol_store *symbols, const struct trace_image *image,
                         uint32_t *module_base)
{
    if (write_process_record(writer, image) < 0 ||
        write_changes(writer, symbols, image, module_base, image->end_ns, 1) < 0 ||
        write_warnings(writer, image) < 0)
        return -1;
    return 0;
}

int trace_output_new_stacks(struct trace_writer *writer, struct symbol_store *symbols, const struct trace_image *image,
                            uint32_t *module_base, uint64_t now_ns, size_t at_least)
{
    struct trace_output_state *state = *image->output;
    if (image->recorder->site_count - (state ? state->stacks_written : 0) < at_least)
        return 0;
    if (!(state = output_state(image)))
        return -1;
    /* The image as it stands first, as a checkpoint has it: a trace cut
     * after these stacks says whose they are and its totals until then.
     * Not once a checkpoint wrote its sites: totals newer than those
     * would not add up. */
    if (!state->checkpointed && write_process_record_at(writer, image, now_ns) < 0)
        return -1;
    /* one run: the loop goes back to the rings between runs (a program
     * that imports every module has 700,000 sites) */
    return write_new_symbols(writer, symbols, image, state, module_base, 1, 1) < 0 ? -1 : 1;
}

void trace_output_state_free(struct trace_output_state *state)
{
    if (!state)
        return;
    word_map_free(&state->by_address);
    struct written_module *module, *next;
    HASH_ITER(hh, state->modules, module, next) {
        HASH_DEL(state->modules, module);
        free(module);
    }
    free(state->sites_written);
    free(state->site_written);
    free(state);
}
