/* Fuzzes the `perf script` parser (tracer/wrappers/perf_script.h) and both writers:
 * any bytes must parse without a memory error, give a profile whose indexes
 * are all in range, and convert. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "../../tracer/wrappers/perf_script.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_invariants(const struct perf_profile *profile)
{
    for (size_t i = 0; i < profile->node_count; i++) {
        const struct perf_node *node = &profile->nodes[i];
        /* A parent is interned before its children. */
        if ((node->parent != PERF_NO_NODE && node->parent >= i) || node->frame >= profile->frame_count)
            abort();
    }
    uint64_t per_thread = 0;
    for (size_t t = 0; t < profile->thread_count; t++) {
        if (!profile->threads[t].name)
            abort();
        per_thread += profile->threads[t].samples;
    }
    if (per_thread != profile->sample_count)
        abort();
    for (size_t i = 0; i < profile->sample_count; i++)
        if (profile->samples[i].thread >= profile->thread_count ||
            (profile->samples[i].node != PERF_NO_NODE && profile->samples[i].node >= profile->node_count))
            abort();
}

static void convert(const struct perf_profile *profile, int collapsed)
{
    char *text = NULL;
    size_t size = 0;
    FILE *out = open_memstream(&text, &size);
    if (!out)
        return;
    int result = collapsed ? perf_write_collapsed(profile, out) : perf_write_speedscope(profile, "fuzz", out);
    fclose(out);
    if (result != 0)
        abort();
    free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct perf_profile profile;
    if (perf_script_parse((const char *)data, size, &profile) != 0)
        return 0;
    check_invariants(&profile);
    convert(&profile, 0);
    convert(&profile, 1);
    perf_profile_free(&profile);
    return 0;
}
