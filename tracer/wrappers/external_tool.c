/* external_tool.c - see external_tool.h. */
#include "external_tool.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static int is_executable_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

char *tool_find_in_path(const char *name)
{
    if (!name || !*name)
        return NULL;
    if (strchr(name, '/'))
        return is_executable_file(name) ? strdup(name) : NULL;
    const char *path = getenv("PATH");
    if (!path)
        path = "/usr/local/bin:/usr/bin:/bin";
    size_t name_length = strlen(name);
    for (const char *dir = path;; dir++) {
        const char *end = strchrnul(dir, ':');
        size_t dir_length = (size_t)(end - dir);
        char *candidate = malloc(dir_length + name_length + 3);
        if (!candidate)
            return NULL;
        /* An empty PATH entry means the current directory, as for execvp. */
        snprintf(candidate, dir_length + name_length + 3, "%.*s/%s", (int)(dir_length ? dir_length : 1),
                 dir_length ? dir : ".", name);
        if (is_executable_file(candidate))
            return candidate;
        free(candidate);
        if (!*end)
            return NULL;
        dir = end;
    }
}

int tool_exit_code(int wait_status)
{
    if (WIFEXITED(wait_status))
        return WEXITSTATUS(wait_status);
    if (WIFSIGNALED(wait_status))
        return 128 + WTERMSIG(wait_status);
    return 1;
}

static void relayed_signals(sigset_t *set)
{
    sigemptyset(set);
    sigaddset(set, SIGINT);
    sigaddset(set, SIGQUIT);
    sigaddset(set, SIGTERM);
    sigaddset(set, SIGHUP);
    sigaddset(set, SIGCHLD);
}

/* Starts argv with the signal mask the caller had and default dispositions,
 * stdout into out_fd (>= 0) and stdin from /dev/null when quiet_stdin. */
static pid_t spawn_tool(char *const argv[], const sigset_t *caller_mask, int out_fd, int err_fd,
                        int quiet_stdin)
{
    posix_spawnattr_t attr;
    posix_spawn_file_actions_t actions;
    posix_spawnattr_init(&attr);
    posix_spawn_file_actions_init(&actions);
    sigset_t defaults;
    relayed_signals(&defaults);
    posix_spawnattr_setsigmask(&attr, caller_mask);
    posix_spawnattr_setsigdefault(&attr, &defaults);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    if (quiet_stdin)
        posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    if (out_fd >= 0)
        posix_spawn_file_actions_adddup2(&actions, out_fd, STDOUT_FILENO);
    if (err_fd >= 0)
        posix_spawn_file_actions_adddup2(&actions, err_fd, STDERR_FILENO);
    pid_t pid;
    int error = posix_spawnp(&pid, argv[0], &actions, &attr, argv, environ);
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
    if (error != 0) {
        errno = error;
        return -1;
    }
    return pid;
}

/* Waits for pid with the relayed signals blocked, passing on those that a
 * process sent to memslope alone (si_code <= 0: kill, sigqueue, tgkill);
 * signals the kernel generated for the terminal's group reached the tool
 * already. */
static int wait_relaying(pid_t pid, const sigset_t *relayed)
{
    for (;;) {
        int status;
        pid_t done = waitpid(pid, &status, WNOHANG);
        if (done == pid)
            return tool_exit_code(status);
        if (done < 0 && errno != EINTR)
            return -1;
        siginfo_t info;
        int sig = sigwaitinfo(relayed, &info);
        if (sig > 0 && sig != SIGCHLD && (info.si_code <= 0 || sig == SIGTERM))
            kill(pid, sig);
    }
}

int tool_run(char *const argv[], int out_fd)
{
    sigset_t relayed, caller_mask;
    relayed_signals(&relayed);
    sigprocmask(SIG_BLOCK, &relayed, &caller_mask);
    int code = -1;
    pid_t pid = spawn_tool(argv, &caller_mask, out_fd, -1, 0);
    if (pid > 0)
        code = wait_relaying(pid, &relayed);
    int saved = errno;
    sigprocmask(SIG_SETMASK, &caller_mask, NULL);
    errno = saved;
    return code;
}

/* Reads fd to its end into output, keeping the first size - 1 bytes. */
static void drain_into(int fd, char *output, size_t size)
{
    size_t used = 0;
    char scratch[4096];
    for (;;) {
        char *into = used + 1 < size ? output + used : scratch;
        size_t room = used + 1 < size ? size - 1 - used : sizeof scratch;
        ssize_t n = read(fd, into, room);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        if (into != scratch)
            used += (size_t)n;
    }
    if (size > 0)
        output[used] = '\0';
}

int tool_run_capture(char *const argv[], char *output, size_t size)
{
    int pipe_fds[2];
    if (pipe2(pipe_fds, O_CLOEXEC) != 0)
        return -1;
    sigset_t relayed, caller_mask;
    relayed_signals(&relayed);
    sigprocmask(SIG_BLOCK, &relayed, &caller_mask);
    pid_t pid = spawn_tool(argv, &caller_mask, pipe_fds[1], pipe_fds[1], 1);
    int saved = errno;
    close(pipe_fds[1]);
    int code = -1;
    if (pid > 0) {
        drain_into(pipe_fds[0], output, size);
        code = wait_relaying(pid, &relayed);
        saved = errno;
    }
    close(pipe_fds[0]);
    sigprocmask(SIG_SETMASK, &caller_mask, NULL);
    errno = saved;
    return code;
}

static int running_on_macos(void)
{
    struct utsname name;
    return uname(&name) == 0 && strcmp(name.sysname, "Darwin") == 0;
}

/* Starts the viewer; it returns once it has handed the file on. */
static int run_viewer(const char *viewer, const char *path)
{
    char *argv[] = {(char *)viewer, (char *)path, NULL};
    int code = tool_run(argv, -1);
    if (code == 0)
        return 0;
    if (code < 0)
        fprintf(stderr, "memslope: cannot start %s to open %s: %s\n", viewer, path, strerror(errno));
    else
        fprintf(stderr, "memslope: %s could not open %s (exit status %d); open it by hand\n", viewer,
                path, code);
    return -1;
}

int tool_open_artifact(const char *path, enum artifact_kind kind)
{
    /* `open` on Linux is often openvt(1), which would do something else
     * entirely: it is the viewer on macOS only. */
    if (kind == ARTIFACT_INSTRUMENTS) {
        char *open_command = running_on_macos() ? tool_find_in_path("open") : NULL;
        int result = 0;
        if (open_command)
            result = run_viewer(open_command, path);
        else
            fprintf(stderr, "memslope: open %s in Instruments (macOS) to view it\n", path);
        free(open_command);
        return result;
    }
    char *speedscope = tool_find_in_path("speedscope");
    int result = 0;
    if (speedscope)
        result = run_viewer(speedscope, path);
    else
        fprintf(stderr,
                "memslope: no `speedscope` command on PATH (npm install -g speedscope); "
                "open https://www.speedscope.app and drop this file onto it:\n  %s\n",
                path);
    free(speedscope);
    return result;
}
