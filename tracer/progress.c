/* progress.c - see progress.h. */
#include "progress.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "../common/units.h"
#include "session_internal.h"

#define PROGRESS_FIRST_NS 500000000ull   /* nothing for a run shorter than this */
#define PROGRESS_PERIOD_NS 250000000ull
#define PROGRESS_DEFAULT_WIDTH 80

void progress_init(struct progress_line *progress, int quiet, uint64_t now_ns)
{
    const char *term = getenv("TERM");
    memset(progress, 0, sizeof *progress);
    progress->enabled = !quiet && isatty(STDERR_FILENO) && !(term && strcmp(term, "dumb") == 0);
    progress->start_ns = now_ns;
    progress->next_ns = now_ns + PROGRESS_FIRST_NS;
}

char *progress_format(char *buffer, size_t size, size_t width, double seconds, uint64_t events, uint64_t live_bytes,
                      const char *case_name, uint64_t iteration)
{
    char count[32], live[32];
    int n = snprintf(buffer, size, "memslope: %.1f s, %s events, %s live", seconds,
                     units_format_count(events, count, sizeof count),
                     units_format_bytes((double)live_bytes, live, sizeof live));
    if (case_name && n >= 0 && (size_t)n < size)
        snprintf(buffer + n, size - (size_t)n, ", case %s iteration %s", case_name,
                 units_format_count(iteration, count, sizeof count));
    /* One column short of the width: a full line would wrap on some terminals. */
    if (width > 1 && strlen(buffer) > width - 1)
        buffer[width - 1] = '\0';
    return buffer;
}

static size_t terminal_width(void)
{
    struct winsize size;
    if (ioctl(STDERR_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 0)
        return size.ws_col;
    return PROGRESS_DEFAULT_WIDTH;
}

/* The open case of the first running image that has one (its iteration too). */
static const char *open_case(const struct session *session, uint64_t *iteration)
{
    for (size_t i = 0; i < session->process_count; i++) {
        const struct traced_process *process = session->processes[i];
        const struct recorder *recorder = &process->recorder;
        if (process->state == PROCESS_ENDED || recorder->open_case == TRACE_NONE)
            continue;
        for (size_t c = 0; c < recorder->case_count; c++)
            if (recorder->cases[c].info.case_id == recorder->open_case) {
                *iteration = recorder->iteration;
                const char *name = recorder->cases[c].info.name;
                if (name && *name)
                    return name;
                /* The whole-process case, named after the command as the report names it. */
                const char *slash = process->argc ? strrchr(process->argv[0], '/') : NULL;
                return slash ? slash + 1 : process->argc ? process->argv[0] : "process";
            }
    }
    return NULL;
}

void progress_update(struct progress_line *progress, const struct session *session, uint64_t now_ns)
{
    if (!progress->enabled || now_ns < progress->next_ns)
        return;
    progress->next_ns = now_ns + PROGRESS_PERIOD_NS;
    uint64_t events = 0, live = 0, iteration = 0;
    for (size_t i = 0; i < session->process_count; i++) {
        const struct traced_process *process = session->processes[i];
        events += process->recorder.allocations + process->recorder.frees;
        if (process->state != PROCESS_ENDED)
            live += process->recorder.live_bytes;
    }
    const char *case_name = open_case(session, &iteration);
    char line[512];
    progress_format(line, sizeof line, terminal_width(), (double)(now_ns - progress->start_ns) / 1e9, events, live,
                    case_name, iteration);
    /* \r and erase to the end of the line: the line is redrawn in place. */
    dprintf(STDERR_FILENO, "\r\033[K%s", line);
    progress->shown = 1;
}

void progress_clear(struct progress_line *progress)
{
    if (!progress->shown)
        return;
    dprintf(STDERR_FILENO, "\r\033[K");
    progress->shown = 0;
}
