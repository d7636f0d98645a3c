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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../common/shm_layout.h"
#include "session.h"
#include "trace_writer.h"

extern char **environ;

#define SEIZE_OPTIONS                                                                                          \
    (PTRACE_O_EXITKILL | PTRACE_O_TRACECLONE | PTRACE_O_TRACEEXEC | PTRACE_O_TRACEEXIT | PTRACE_O_TRACEFORK | \
     PTRACE_O_TRACEVFORK)

/* environ plus LD_PRELOAD (the shim first, then what was there) and the
 * shim's settings; the strings this makes are put in owned[0..4], for the
 * caller to free once the child has exec'd. */
static char **target_environment(const struct session *session, const char *shim_path, char *owned[5])
{
    size_t count = 0;
    while (environ[count])
        count++;
    char **env = calloc(count + 13, sizeof *env);
    if (!env)
        return NULL;
    size_t n = 0;
    const char *previous_preload = NULL;
    for (size_t i = 0; i < count; i++) {
        if (strncmp(environ[i], "LD_PRELOAD=", 11) == 0)
            previous_preload = environ[i] + 11;
        else if (strncmp(environ[i], "MEMSLOPE_", 9) != 0)
            env[n++] = environ[i];
    }
    char *preload = NULL, *tracer = NULL, *frames = NULL, *sample = NULL;
    if (!session->options.follow_children)
        env[n++] = SHM_ENV_NO_FOLLOW "=1";
    if (session->options.no_freeres)
        env[n++] = SHM_ENV_NO_FREERES "=1";
    if (previous_preload && *previous_preload)
        (void)!asprintf(&preload, "LD_PRELOAD=%s:%s", shim_path, previous_preload);
    else
        (void)!asprintf(&preload, "LD_PRELOAD=%s", shim_path);
    (void)!asprintf(&tracer, "%s=%d", SHM_ENV_TRACER_PID, (int)getpid());
    (void)!asprintf(&frames, "%s=%u", SHM_ENV_MAX_FRAMES, session->options.max_frames);
    (void)!asprintf(&sample, "%s=%llu", SHM_ENV_SAMPLE_RATE, (unsigned long long)session->options.sample_rate);
    if (!preload || !tracer || !frames || !sample) {
        free(preload), free(tracer), free(frames), free(sample), free(env);
        return NULL;
    }
    env[n++] = owned[0] = preload;
    env[n++] = owned[1] = tracer;
    env[n++] = owned[2] = frames;
    env[n++] = owned[3] = sample;
    if (session->options.python_iteration) {
        if (asprintf(&owned[4], "%s=%s", SHM_ENV_PY_ITERATION, session->options.python_iteration) < 0) {
            owned[4] = NULL;
            for (int i = 0; i < 4; i++)
                free(owned[i]);
            free(env);
            return NULL;
        }
        env[n++] = owned[4];
    }
    env[n] = NULL;
    return env;
}

/* In the child: wait for the go-ahead, exec, or report errno and die. 'n'
 * instead of 'g' means the tracer could not attach: the shim records
 * anyway, in this process only (see session_run_without_ptrace). */
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
static void abandon_child(pid_t child)
{
    kill(child, SIGKILL);
    waitpid(child, NULL, __WALL);
}

int session_launch(struct session *session, const char *shim_path)
{
    const char *command = session->options.command[0];
    char *owned[5] = {NULL, NULL, NULL, NULL, NULL};
    char **env = target_environment(session, shim_path, owned);
    int go[2], error[2], sockets[2];
    if (!env || pipe2(go, O_CLOEXEC) < 0 || pipe2(error, O_CLOEXEC) < 0 ||
        socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sockets) < 0) {
        fprintf(stderr, "memslope: cannot start '%s': %s\n", command, strerror(errno));
        return 1;
    }
    session->start_ns = session_now_ns();
    pid_t child = fork();
    if (child < 0) {
        fprintf(stderr, "memslope: cannot start '%s': fork: %s\n", command, strerror(errno));
        return 1;
    }
    if (child == 0) {
        close(go[1]);
        close(error[0]);
        close(sockets[0]);
        run_child(go[0], error[1], sockets[1], session->options.command, env);
    }
    close(go[0]);
    close(error[1]);
    close(sockets[1]);
    session->region_socket = sockets[0];
    fcntl(sockets[0], F_SETFL, O_NONBLOCK);
    session->initial_pid = child;

    if (getenv("MEMSLOPE_TEST_NO_PTRACE") || ptrace(PTRACE_SEIZE, child, 0, (void *)(long)SEIZE_OPTIONS) < 0) {
        if (session->options.iteration_symbol) {
            abandon_child(child);
            fprintf(stderr, "memslope: cannot trace '%s': ptrace is not permitted here, and --iteration needs it "
                            "(run with CAP_SYS_PTRACE, or check kernel.yama.ptrace_scope and the seccomp profile; "
                            "or mark iterations with the marker API, which works without ptrace)\n", command);
            return 1;
        }
        session->no_ptrace = 1;
        /* One line; the leak check at exit still runs, from inside the
         * process (preload/exit_check.c). */
        fprintf(stderr, "memslope: ptrace is not permitted here: recording without it. Lost: --iteration, "
                        "children (not followed), snapshots with the world stopped (they follow the event order), "
                        "the leak check at case ends and at a fatal signal, other threads' registers at the exit "
                        "check. Run with CAP_SYS_PTRACE to have them.\n");
    }

    char default_name[4096], err[4096];
    const char *output = session->options.output;
    if (!output) {
        default_output_name(default_name, sizeof default_name, command, child);
        output = default_name;
    }
    session->writer = trace_writer_create(output, err, sizeof err);
    if (!session->writer || write_info(session) < 0) {
        fprintf(stderr, "memslope: %s (nothing was run)\n",
                session->writer ? trace_writer_error(session->writer) : err);
        abandon_child(child);
        return 1;
    }

    (void)!write(go[1], session->no_ptrace ? "n" : "g", 1);
    close(go[1]);
    int exec_error = 0;
    ssize_t n;
    do
        n = read(error[0], &exec_error, sizeof exec_error);
    while (n < 0 && errno == EINTR);
    close(error[0]);
    /* The child has exec'd (or failed to): its copy of env is gone. */
    for (int i = 0; i < 5; i++)
        free(owned[i]);
    free(env);
    if (n == (ssize_t)sizeof exec_error) {
        waitpid(child, NULL, __WALL);
        fprintf(stderr, "memslope: cannot run '%s': %s\n", command, strerror(exec_error));
        trace_writer_remove(session->writer);
        session->writer = NULL;
        return exec_error == ENOENT ? 127 : 126;
    }
    snprintf(session->output_path, sizeof session->output_path, "%s", output);
    return 0;
}
