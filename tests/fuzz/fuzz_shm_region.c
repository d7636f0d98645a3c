/* fuzz_shm_region.c - libFuzzer target: the shared region as a target that
 * scribbles over it could leave it (issue 19). The input is laid over the
 * parts the tracer reads: slot 0's positions and ring, the start of the
 * stack table and frame pool, the name pool, the Python code table and
 * text pool. The tracer drains it into a recorder and names every Python
 * frame word of the sites it made, as a recording does. Whatever the
 * bytes: no memory error, and memory bounded by what the region can
 * describe (libFuzzer's -rss_limit_mb fails the run otherwise). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../../common/shm_layout.h"
#include "../../tracer/python_frames.h"
#include "../../tracer/recorder.h"
#include "../../tracer/shm_consumer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The parts of the region the input covers, and how many bytes of each. */
struct part {
    size_t offset, length;
};

static void *region;

static void parts_of(struct part parts[6])
{
    parts[0] = (struct part){SHM_SLOTS_OFFSET, 64 + 512 * sizeof(struct shm_event) + 128};
    parts[1] = (struct part){SHM_STACK_TABLE_OFFSET, 256 * sizeof(struct shm_stack_entry)};
    parts[2] = (struct part){SHM_FRAME_POOL_OFFSET, 1024 * sizeof(uint64_t)};
    parts[3] = (struct part){SHM_NAME_POOL_OFFSET, 256};
    parts[4] = (struct part){SHM_PYTHON_CODE_OFFSET, 64 * sizeof(struct shm_python_code)};
    parts[5] = (struct part){SHM_PYTHON_TEXT_OFFSET, 4096};
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!region) {
        region = mmap(NULL, SHM_TOTAL_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1,
                      0);
        if (region == MAP_FAILED)
            abort();
        /* the header was checked when the tracer attached; drains read
         * its clock source (0: nanoseconds) and the slots' high water
         * mark, which the first slot's claim raised */
        ((struct shm_header *)region)->slots_high_water = 1;
    }
    struct part parts[6];
    parts_of(parts);
    size_t at = 0;
    for (int i = 0; i < 6 && at < size; i++) {
        size_t n = size - at < parts[i].length ? size - at : parts[i].length;
        /* the slot's ring begins after its two control lines: keep the
         * input's first bytes for the positions and state */
        memcpy((char *)region + parts[i].offset, data + at, n);
        at += n;
    }
    struct shm_consumer consumer;
    shm_consumer_init(&consumer);
    consumer.base = region;
    consumer.size = SHM_TOTAL_SIZE;
    struct recorder recorder;
    recorder_init(&recorder, 1000000);
    struct python_frames python;
    python_frames_init(&python);
    shm_consumer_drain(&consumer, &recorder, 1);
    for (size_t s = 0; s < recorder.site_count; s++)
        for (uint32_t f = 0; f < recorder.sites[s].depth; f++)
            if (shm_is_python_word(recorder.sites[s].frames[f]))
                python_frames_add(&python, region, recorder.sites[s].frames[f]);
    python_frames_free(&python);
    recorder_free(&recorder);
    consumer.base = NULL; /* not the consumer's mapping */
    shm_consumer_detach(&consumer);
    for (int i = 0; i < 6; i++)
        memset((char *)region + parts[i].offset, 0, parts[i].length);
    return 0;
}
