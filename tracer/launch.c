/*
 * launch.c - starting the target for `memslope record`: fork, wait until the
 * tracer has seized the child, exec with the shim preloaded. The trace file
 * is created between the fork and the exec, so an unwritable output path is
 * reported before the target has run a single instruction of its own.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../common/shm_layout.h"
#include "../common/units.h"
#include "session_internal.h"
#include "trace_writer.h"
#include "symbols/symbols.h"
#include "tsc_check.h"

extern char **environ;

#define SEIZE_OPTIONS                                                                                          \
    (PTRACE_O_EXITKILL | PTRACE_O_TRACECLONE | PTRACE_O_TRACEEXEC | PTRACE_O_TRACEEXIT | PTRACE_O_TRACEFORK | \
     PTRACE_O_TRACEVFORK)

/* Whether the target's threads may hold their unsampled blocks back
 * (preload/held_set.h): with --sample-rate, unless iterations are marked
 * by the tracer or the interpreter (the shim cannot tell when those open a
 * case). 1: while the image allocates fast enough to pay (hold_wanted);
 * 2: always (MEMSLOPE_HOLD=always in memslope's own environment, for
 * tests); 0: never (MEMSLOPE_HOLD=0, to measure what it buys). */
static int holding_wanted(const struct record_options *options)
{
    const char *hold = getenv(SHM_ENV_HOLD);
    if (!options->sample_rate || options->iteration_symbol || options->python_iteration ||
        (hold && strcmp(hold, "0") == 0))
        return 0;
    return hold && strcmp(hold, "always") == 0 ? 2 : 1;
}

/* The drain loop's sleep while the rings are quiet: IDLE_WAIT_NS, or
 * MEMSLOPE_IDLE_WAIT_MS in memslope's own environment (tests: with a
 * sleep of a minute, a run that ends in time was woken by its stops and
 * the doorbell alone, shm_layout.h). */
static uint64_t idle_wait_wanted(void)
{
    const char *set = getenv("MEMSLOPE_IDLE_WAIT_MS");
    uint64_t ms;
    if (!set || !*set)
        return IDLE_WAIT_NS;
    if (units_parse_count(set, &ms) == 0 && ms >= 1 && ms <= 3600000)
        return ms * 1000000ull;
    fprintf(stderr,
            "memslope: warning: MEMSLOPE_IDLE_WAIT_MS=%s is not a number of milliseconds from 1 to 3600000; the "
            "default sleep of %ld ms applies\n",
            set, IDLE_WAIT_NS / 1000000L);
    return IDLE_WAIT_NS;
}

/* The target's environment is environ (less LD_PRELOAD and MEMSLOPE_*)
 * plus the shim's settings, added in two steps into one array: the tracer
 * adds up to TRACER_SETTINGS before the fork (no-follow, no-freeres, the
 * clock, holding, LD_PRELOAD, the tracer's pid, the frame limit, the sample rate,
 * the Python iteration, the unwind rules' folder), the child up to
 * CHILD_SETTINGS after it (the socket,
 * and without ptrace: no-ptrace, no-follow, its own pid), since only the
 * child knows them; the array is sized for both and the final NULL. */
#define TRACER_SETTINGS 10
#define CHILD_SETTINGS 4
/* The settings the tracer formats (LD_PRELOAD, the tracer's pid, the frame
 * limit, the sample rate, the Python iteration, the unwind rules' folder):
 * freed once the child has exec'd. */
#define OWNED_SETTINGS 6

/* What a launch holds until it is done, released in one place whatever
 * the outcome. A descriptor is -1 once closed or handed over. */
struct launch {
    char **env;
    char *owned[OWNED_SETTINGS];
    int go[2];      /* the tracer says go ('g', or 'n' without ptrace) */
    int error[2];   /* the child's errno when exec fails; closed by exec */
    int sockets[2]; /* the shims' socket: [0] the session's, [1] the child's */
    pid_t child;    /* -1 until forked; 0 once collected, having never exec'd */
};

static void close_descriptor(int *fd)
{
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

static void launch_release(struct launch *launch)
{
    for (int i = 0; i < OWNED_SETTINGS; i++)
        free(launch->owned[i]);
    free(launch->env);
    for (int i = 0; i < 2; i++) {
        close_descriptor(&launch->go[i]);
        close_descriptor(&launch->error[i]);
        close_descriptor(&launch->sockets[i]);
    }
}

/* One NAME=VALUE of the target's environment, malloc'ed; NULL when out
 * of memory. */
__attribute__((format(printf, 1, 2))) static char *setting(const char *format, ...)
{
    char *text;
    va_list args;
    va_start(args, format);
    int length = vasprintf(&text, format, args);
    va_end(args);
    return length < 0 ? NULL : text;
}

/* environ plus LD_PRELOAD (the shim first, then what was there) and the
 * shim's settings; the strings it formats go in launch->owned. 0, or -1
 * when out of memory. */
static int target_environment(const struct session *session, const char *shim_path, struct launch *launch)
{
    static const char preload_prefix[] = "LD_PRELOAD=", memslope_prefix[] = "MEMSLOPE_";
    size_t count = 0;
    while (environ[count])
        count++;
    char **env = launch->env = calloc(count + TRACER_SETTINGS + CHILD_SETTINGS + 1, sizeof *env);
    if (!env)
        return -1;
    size_t n = 0;
    const char *previous_preload = NULL;
    for (size_t i = 0; i < count; i++) {
        if (strncmp(environ[i], preload_prefix, sizeof preload_prefix - 1) == 0)
            previous_preload = environ[i] + sizeof preload_prefix - 1;
        else if (strncmp(environ[i], memslope_prefix, sizeof memslope_prefix - 1) != 0)
            env[n++] = environ[i];
    }
    if (!session->options.follow_children)
        env[n++] = SHM_ENV_NO_FOLLOW "=1";
    if (session->options.no_freeres)
        env[n++] = SHM_ENV_NO_FREERES "=1";
    if (session->clock_is_tsc)
        env[n++] = SHM_ENV_CLOCK "=tsc";
    if (session->holding)
        env[n++] = session->holding == 2 ? SHM_ENV_HOLD "=always" : SHM_ENV_HOLD "=1";
    char **owned = launch->owned;
    if (previous_preload && *previous_preload)
        owned[0] = setting("LD_PRELOAD=%s:%s", shim_path, previous_preload);
    else
        owned[0] = setting("LD_PRELOAD=%s", shim_path);
    owned[1] = setting("%s=%d", SHM_ENV_TRACER_PID, (int)getpid());
    owned[2] = setting("%s=%u", SHM_ENV_MAX_FRAMES, session->options.max_frames);
    owned[3] = setting("%s=%llu", SHM_ENV_SAMPLE_RATE, (unsigned long long)session->options.sample_rate);
    int failed = !owned[0] || !owned[1] || !owned[2] || !owned[3];
    if (session->options.python_iteration)
        failed |= !(owned[4] = setting("%s=%s", SHM_ENV_PY_ITERATION, session->options.python_iteration));
    const char *rules = session->kept_rules ? symbol_store_cache_directory(session->symbols) : NULL;
    if (rules)
        failed |= !(owned[5] = setting("%s=%s", SHM_ENV_UNWIND_RULES, rules));
    for (int i = 0; i < OWNED_SETTINGS; i++)
        if (owned[i])
            env[n++] = owned[i];
    env[n] = NULL;
    return failed ? -1 : 0;
}

/* In the child: wait for the go-ahead, exec, or report errno and die. 'n'
 * instead of 'g' means the tracer could not attach: the shim records
 * anyway, in this process only (session_run then runs without ptrace). */
static void run_child(int go_fd, int error_fd, int region_socket, char *const *command, char **env)
{
    char go;
    ssize_t n;
    do
        n = read(go_fd, &go, 1);
    while (n < 0 && errno == EINTR);
    if (n != 1)
        _exit(127);
    static char socket_setting[64], pid_setting[64];
    size_t end = 0;
    while (env[end])
        end++;
    /* The socket stays open across exec (and fork), for every image's shim
     * to hand its region over the moment it exists. */
    if (region_socket >= 0 && fcntl(region_socket, F_SETFD, 0) == 0) {
        snprintf(socket_setting, sizeof socket_setting, "%s=%d", SHM_ENV_SOCKET, region_socket);
        env[end++] = socket_setting;
    }
    if (go == 'n') {
        env[end++] = SHM_ENV_NO_PTRACE "=1";
        env[end++] = SHM_ENV_NO_FOLLOW "=1";
        snprintf(pid_setting, sizeof pid_setting, "%s=%d", SHM_ENV_TARGET_PID, (int)getpid());
        env[end++] = pid_setting;
    }
    env[end] = NULL;
    execvpe(command[0], command, env);
    int error = errno;
    (void)!write(error_fd, &error, sizeof error);
    _exit(127);
}

static void default_output_name(char *buffer, size_t size, const char *command, pid_t pid)
{
    char *copy = strdup(command);
    const char *base = copy ? basename(copy) : "target";
    snprintf(buffer, size, "memslope.%s.%d.trace", base, (int)pid);
    free(copy);
}

static int write_info(struct session *session)
{
    struct timespec wall;
    clock_gettime(CLOCK_REALTIME, &wall);
    struct trace_info info = {
        .memslope_version = MEMSLOPE_VERSION,
        .start_unix_ns = (uint64_t)wall.tv_sec * 1000000000ull + (uint64_t)wall.tv_nsec,
        .argc = (uint32_t)session->options.command_argc,
        .argv = (const char *const *)session->options.command,
        .max_frames = session->options.max_frames,
        .snapshots_limit = session->options.snapshots_limit,
        .interval_ns = session->options.interval_ns,
        .sample_rate = session->options.sample_rate,
        .leak_check = session->options.leak_check,
        .flags = session->options.no_freeres ? TRACE_INFO_NO_FREERES : 0,
    };
    return trace_write_info(session->writer, &info);
}

/* Stops the child that will never exec and collects it. */
static void abandon_child(struct launch *launch)
{
    kill(launch->child, SIGKILL);
    waitpid(launch->child, NULL, __WALL);
    launch->child = 0;
}

/* Where the clock's verdict is kept for ten minutes (tsc_check.h): beside
 * the symbol cache, $XDG_CACHE_HOME/memslope/clock, unless the user keeps
 * no cache (--no-symbol-cache). NULL: nowhere. */
static const char *clock_verdict_file(const struct session *session, char *path, size_t size)
{
    if (session->options.no_symbol_cache || memslope_cache_path("/clock", path, size) < 0)
        return NULL;
    return path;
}

/* The environment, the pipes and the socket, then the fork; the child
 * waits for the go-ahead. 0, or 1 with a message. */
static int start_child(struct session *session, const char *shim_path, struct launch *launch)
{
    const char *command = session->options.command[0];
    uint32_t clock = session->options.clock;
    char verdict_file[4096];
    session->clock_is_tsc =
        clock == EVENT_CLOCK_TSC ||
        (clock == EVENT_CLOCK_AUTO &&
         tsc_orders_events_cached(clock_verdict_file(session, verdict_file, sizeof verdict_file)));
    if (session->options.verbose)
        fprintf(stderr, "memslope: events stamped with %s%s\n", session->clock_is_tsc ? "the TSC" : "CLOCK_MONOTONIC",
                clock == EVENT_CLOCK_AUTO ? "" : " (--clock)");
    session->holding = holding_wanted(&session->options);
    session->idle_wait_ns = idle_wait_wanted();
    if (target_environment(session, shim_path, launch) < 0 || pipe2(launch->go, O_CLOEXEC) < 0 ||
        pipe2(launch->error, O_CLOEXEC) < 0 ||
        socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, launch->sockets) < 0) {
        fprintf(stderr, "memslope: cannot start '%s': %s\n", command, strerror(errno));
        return 1;
    }
    session->start_ns = session_now_ns();
    launch->child = fork();
    if (launch->child < 0) {
        fprintf(stderr, "memslope: cannot start '%s': fork: %s\n", command, strerror(errno));
        return 1;
    }
    if (launch->child == 0) {
        close(launch->go[1]);
        close(launch->error[0]);
        close(launch->sockets[0]);
        run_child(launch->go[0], launch->error[1], launch->sockets[1], session->options.command, launch->env);
    }
    close_descriptor(&launch->go[0]);
    close_descriptor(&launch->error[1]);
    close_descriptor(&launch->sockets[1]);
    session->region_socket = launch->sockets[0];
    launch->sockets[0] = -1; /* the session's from now on */
    /* A message (a new image's region, an exit check) rings the doorbell
     * (shm_layout.h), so the drain loop need not wake often to look. */
    fcntl(session->region_socket, F_SETOWN, getpid());
    fcntl(session->region_socket, F_SETSIG, SHM_TRACER_DOORBELL);
    fcntl(session->region_socket, F_SETFL, O_NONBLOCK | O_ASYNC);
    session->initial_pid = launch->child;
    return 0;
}

/* Seizes the child, or settles for recording without ptrace where it is
 * not permitted (say so); --iteration needs it. 0, or 1 with a message. */
static int seize_child(struct session *session, pid_t child)
{
    if (ptrace(PTRACE_SEIZE, child, 0, (void *)(long)SEIZE_OPTIONS) == 0)
        return 0;
    if (session->options.iteration_symbol) {
        fprintf(stderr, "memslope: cannot trace '%s': ptrace is not permitted here, and --iteration needs it "
                        "(run with CAP_SYS_PTRACE, or check kernel.yama.ptrace_scope and the seccomp profile; "
                        "or mark iterations with the marker API, which works without ptrace)\n",
                session->options.command[0]);
        return 1;
    }
    session->no_ptrace = 1;
    /* One line; the leak check at exit still runs, from inside the
     * process (preload/exit_check.c). */
    fprintf(stderr, "memslope: ptrace is not permitted here: recording without it. Lost: --iteration, "
                    "children (not followed), snapshots with the world stopped (they follow the event order), "
                    "the leak check at case ends and at a fatal signal, other threads' registers at the exit "
                    "check. Run with CAP_SYS_PTRACE to have them.\n");
    return 0;
}

/* The trace file, created before the target runs anything of its own:
 * an unwritable path is reported with nothing run. *output: the path (-o,
 * or a default name made in default_name). 0, or 1 with a message. */
static int create_trace(struct session *session, pid_t child, char *default_name, size_t default_size,
                        const char **output)
{
    char err[4096];
    *output = session->options.output;
    if (!*output) {
        default_output_name(default_name, default_size, session->options.command[0], child);
        *output = default_name;
    }
    session->writer = trace_writer_create(*output, err, sizeof err);
    if (!session->writer || write_info(session) < 0) {
        fprintf(stderr, "memslope: %s (nothing was run)\n",
                session->writer ? trace_writer_error(session->writer) : err);
        return 1;
    }
    return 0;
}

/* Lets the child exec and waits until it has (the error pipe closes) or
 * has failed to (its errno arrives, and it exits). 0, or the exit code of
 * a command that could not run (127 not found, 126 otherwise). */
static int release_child(struct session *session, struct launch *launch)
{
    (void)!write(launch->go[1], session->no_ptrace ? "n" : "g", 1);
    close_descriptor(&launch->go[1]);
    int exec_error = 0;
    ssize_t n;
    do
        n = read(launch->error[0], &exec_error, sizeof exec_error);
    while (n < 0 && errno == EINTR);
    if (n != (ssize_t)sizeof exec_error)
        return 0;
    waitpid(launch->child, NULL, __WALL);
    launch->child = 0;
    fprintf(stderr, "memslope: cannot run '%s': %s\n", session->options.command[0], strerror(exec_error));
    trace_writer_remove(session->writer);
    session->writer = NULL;
    return exec_error == ENOENT ? 127 : 126;
}

int session_launch(struct session *session, const char *shim_path)
{
    struct launch launch = {.go = {-1, -1}, .error = {-1, -1}, .sockets = {-1, -1}, .child = -1};
    char default_name[4096];
    const char *output = NULL;
    int rc = start_child(session, shim_path, &launch);
    if (rc == 0 && ((rc = seize_child(session, launch.child)) != 0 ||
                    (rc = create_trace(session, launch.child, default_name, sizeof default_name, &output)) != 0))
        abandon_child(&launch);
    if (rc == 0)
        rc = release_child(session, &launch);
    if (rc == 0)
        snprintf(session->output_path, sizeof session->output_path, "%s", output);
    launch_release(&launch); /* the child has exec'd, or is gone: its copy of env with it */
    return rc;
}
