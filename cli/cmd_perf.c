/*
 * cmd_perf.c - `memslope perf`: CPU sampling with Linux perf, converted to
 * speedscope JSON (or collapsed stacks) for one viewer on every platform.
 *
 * perf is probed before the command runs, so each way it commonly fails
 * (not installed, not the kernel's version, perf_event_paranoid, no hardware
 * counters in a VM) is explained with its fix instead of perf's own error.
 * The raw perf.data is kept beside the output for `perf report`.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "../common/options.h"
#include "commands.h"
#include "../tracer/wrappers/wrappers.h"
#include "../common/output_file.h"

#define DEFAULT_RATE "1000"
#define PROBE_OUTPUT_SIZE 8192
#define CAP_SYS_ADMIN_BIT 21
#define CAP_PERFMON_BIT 38

struct perf_options {
    const char *rate;
    const char *call_graph; /* "dwarf" or "fp" */
    bool collapsed;
    const char *output;     /* NULL: named after the command and its pid */
    bool open;
    char **command;
};

struct perf_setup {
    char *perf;        /* full path */
    const char *event; /* "cycles", or "cpu-clock" where there are no counters */
};

static int parse_rate(const char *value, void *destination, char *err, size_t err_size)
{
    char *end;
    errno = 0;
    long hz = strtol(value, &end, 10);
    if (errno || !*value || *end || hz <= 0 || hz > 100000) {
        snprintf(err, err_size, "--rate must be 1..100000 Hz, not %s", value);
        return -1;
    }
    *(const char **)destination = value;
    return 0;
}

static int parse_call_graph(const char *value, void *destination, char *err, size_t err_size)
{
    if (strcmp(value, "dwarf") != 0 && strcmp(value, "fp") != 0) {
        snprintf(err, err_size, "--call-graph must be dwarf or fp, not %s", value);
        return -1;
    }
    *(const char **)destination = value;
    return 0;
}

static int parse_format(const char *value, void *destination, char *err, size_t err_size)
{
    if (strcmp(value, "speedscope") != 0 && strcmp(value, "collapsed") != 0) {
        snprintf(err, err_size, "--format must be speedscope or collapsed, not %s", value);
        return -1;
    }
    *(bool *)destination = strcmp(value, "collapsed") == 0;
    return 0;
}

static const struct option_entry perf_entries[] = {
    OPT_VALUE(0, "rate", "HZ", struct perf_options, rate, parse_rate,
              "samples per second, 1 to 100000 (default " DEFAULT_RATE ")", .wants = "a frequency in Hz"),
    OPT_VALUE(0, "call-graph", "dwarf|fp", struct perf_options, call_graph, parse_call_graph,
              "how perf unwinds stacks (default dwarf)", .wants = "dwarf or fp"),
    OPT_VALUE(0, "format", "speedscope|collapsed", struct perf_options, collapsed, parse_format,
              "speedscope JSON (default) or collapsed stacks", .wants = "speedscope or collapsed"),
    OPT_STRING('o', "output", "OUT", struct perf_options, output,
               "the profile (default memslope.COMMAND.PID.speedscope.json)", .wants = "a file name",
               .nonempty = true),
    OPT_FLAG(0, "open", struct perf_options, open, "open the profile in its viewer when done"),
};

const struct option_table cmd_perf_options = {
    .command = "perf",
    .synopsis = "[options] [--] COMMAND [ARG...]",
    .mode = OPERANDS_END_OPTIONS,
    .entries = perf_entries,
    .entry_count = OPTION_COUNT(perf_entries),
    .notes = "Samples COMMAND's CPU use with Linux perf and writes a speedscope profile (default\n"
             "memslope.COMMAND.PID.speedscope.json; the raw data beside it as OUT.perf.data).\n",
    .failure_status = 1,
};

/* OPTIONS_RUN, or the exit status (options.h). */
static int parse_perf_options(int argc, char **argv, struct perf_options *options)
{
    *options = (struct perf_options){.rate = DEFAULT_RATE, .call_graph = "dwarf"};
    struct option_operands command;
    int rc = options_parse(&cmd_perf_options, argc, argv, options, &command);
    if (rc != OPTIONS_RUN)
        return rc;
    if (command.count == 0)
        return options_usage_error(&cmd_perf_options, "no command to profile");
    options->command = command.items;
    return OPTIONS_RUN;
}

/* ---- probing perf ------------------------------------------------------- */

static const char *kernel_release(struct utsname *name)
{
    return uname(name) == 0 ? name->release : "(unknown)";
}

static int read_paranoid_level(void)
{
    FILE *file = fopen("/proc/sys/kernel/perf_event_paranoid", "r");
    int level = 2; /* the kernel's default when the file cannot be read */
    if (file) {
        if (fscanf(file, "%d", &level) != 1)
            level = 2;
        fclose(file);
    }
    return level;
}

/* Root, or CAP_PERFMON / CAP_SYS_ADMIN in the effective set: perf_event_paranoid
 * does not apply. */
static int perf_privileged(void)
{
    if (geteuid() == 0)
        return 1;
    FILE *status = fopen("/proc/self/status", "r");
    unsigned long long effective = 0;
    char line[256];
    while (status && fgets(line, sizeof line, status))
        if (sscanf(line, "CapEff: %llx", &effective) == 1)
            break;
    if (status)
        fclose(status);
    return (effective >> CAP_PERFMON_BIT & 1) || (effective >> CAP_SYS_ADMIN_BIT & 1);
}

static void print_indented(const char *text)
{
    const char *line = text;
    for (int printed = 0; *line && printed < 12; printed++) {
        const char *end = strchrnul(line, '\n');
        if (end > line)
            fprintf(stderr, "    %.*s\n", (int)(end - line), line);
        line = *end ? end + 1 : end;
    }
}

static int explain_not_installed(void)
{
    struct utsname name;
    fprintf(stderr,
            "memslope perf: perf is not installed (no `perf` on PATH).\n"
            "  Install it: `apt-get install linux-perf` (Debian), `apt-get install linux-tools-%s`\n"
            "  (Ubuntu), `dnf install perf` (Fedora); then run this command again.\n",
            kernel_release(&name));
    return 1;
}

static int explain_version_mismatch(const char *output)
{
    struct utsname name;
    const char *release = kernel_release(&name);
    fprintf(stderr, "memslope perf: the installed perf does not match the running kernel %s; it says:\n",
            release);
    print_indented(output);
    fprintf(stderr,
            "  Install the perf for this kernel (Debian: `apt-get install linux-perf`, after upgrading\n"
            "  to the kernel it is built for; Ubuntu: `apt-get install linux-tools-%s`), or put a\n"
            "  perf binary built for it first on PATH.\n",
            release);
    return 1;
}

static int explain_not_permitted(const char *output)
{
    fprintf(stderr, "memslope perf: perf is not permitted to sample here; it says:\n");
    print_indented(output);
    fprintf(stderr, "  kernel.perf_event_paranoid is %d, and memslope runs %s CAP_PERFMON or CAP_SYS_ADMIN.\n",
            read_paranoid_level(), perf_privileged() ? "with" : "without");
    fprintf(stderr,
            "  Lower the setting: `sudo sysctl kernel.perf_event_paranoid=1` (2 still allows sampling\n"
            "  your own processes in user space; make it last in /etc/sysctl.d/), or run memslope with\n"
            "  CAP_PERFMON (Linux 5.8+) or as root. In a container the host's setting applies and the\n"
            "  default seccomp profile blocks perf_event_open: run the container with\n"
            "  `--cap-add PERFMON` (older kernels: SYS_ADMIN) or `--privileged`.\n");
    return 1;
}

/* perf stat counts EVENT over `true`: the cheapest way to learn whether the
 * event exists and whether we may use it. */
static enum perf_problem probe_event(const char *perf, const char *event, char *output, size_t size)
{
    char *argv[] = {(char *)perf, "stat", "-x", ",", "-e", (char *)event, "--", "true", NULL};
    int code = tool_run_capture(argv, output, size);
    if (code < 0) {
        snprintf(output, size, "cannot run %s: %s", perf, strerror(errno));
        return PERF_OTHER_FAILURE;
    }
    return perf_classify_output(output, code);
}

static int explain_probe_failure(enum perf_problem problem, const char *event, const char *output)
{
    if (problem == PERF_NOT_PERMITTED)
        return explain_not_permitted(output);
    if (problem == PERF_VERSION_MISMATCH)
        return explain_version_mismatch(output);
    fprintf(stderr, "memslope perf: perf cannot sample the %s event here; it says:\n", event);
    print_indented(output);
    fprintf(stderr, "  Check that `perf stat -e %s -- true` works, then run this command again.\n", event);
    return 1;
}

static int choose_event(struct perf_setup *setup, char *output)
{
    enum perf_problem problem = probe_event(setup->perf, "cycles", output, PROBE_OUTPUT_SIZE);
    if (problem == PERF_OK) {
        setup->event = "cycles";
        return 0;
    }
    if (problem != PERF_EVENT_UNSUPPORTED)
        return explain_probe_failure(problem, "cycles", output);
    fprintf(stderr, "memslope perf: the hardware cycle counter is not available here (usual in VMs and\n"
                    "  containers); sampling with the cpu-clock software timer instead.\n");
    problem = probe_event(setup->perf, "cpu-clock", output, PROBE_OUTPUT_SIZE);
    if (problem != PERF_OK)
        return explain_probe_failure(problem, "cpu-clock", output);
    setup->event = "cpu-clock";
    return 0;
}

/* Only a note: a perf binary with file capabilities (setcap cap_perfmon) may
 * sample whatever the setting, so the perf stat probe decides. */
static void note_paranoid_level(void)
{
    if (perf_privileged() || read_paranoid_level() != 2)
        return;
    fprintf(stderr, "memslope perf: kernel.perf_event_paranoid is 2, so kernel frames are not sampled\n"
                    "  (`sudo sysctl kernel.perf_event_paranoid=1` adds them).\n");
}

static int explain_broken_perf(const char *perf, int code, const char *output)
{
    fprintf(stderr, "memslope perf: `%s --version` failed (exit status %d); it says:\n", perf, code);
    print_indented(output);
    fprintf(stderr, "  Reinstall perf (Debian: `apt-get install --reinstall linux-perf`) and run this again.\n");
    return 1;
}

/* Returns 0 with setup filled, or 1 after explaining what is wrong. */
static int probe_perf(struct perf_setup *setup)
{
    setup->perf = tool_find_in_path("perf");
    if (!setup->perf)
        return explain_not_installed();
    char *output = malloc(PROBE_OUTPUT_SIZE);
    if (!output)
        return 1;
    char *argv[] = {setup->perf, "--version", NULL};
    int code = tool_run_capture(argv, output, PROBE_OUTPUT_SIZE);
    int result;
    if (code != 0 && perf_classify_output(output, code) == PERF_VERSION_MISMATCH) {
        result = explain_version_mismatch(output);
    } else if (code != 0) {
        result = explain_broken_perf(setup->perf, code, code < 0 ? strerror(errno) : output);
    } else {
        note_paranoid_level();
        result = choose_event(setup, output);
    }
    free(output);
    return result;
}

/* ---- recording ---------------------------------------------------------- */

static const char *command_basename(const char *command)
{
    const char *slash = strrchr(command, '/');
    return slash && slash[1] ? slash + 1 : command;
}

__attribute__((format(printf, 1, 2))) static char *format_path(const char *format, ...)
{
    char *path = NULL;
    va_list args;
    va_start(args, format);
    int length = vasprintf(&path, format, args);
    va_end(args);
    return length < 0 ? NULL : path;
}

static char *with_suffix(const char *path, const char *suffix)
{
    char *joined = NULL;
    if (asprintf(&joined, "%s%s", path, suffix) < 0)
        return NULL;
    return joined;
}

/* perf record -e EVENT -F HZ --call-graph=MODE -o DATA -- COMMAND...; the
 * status is perf's, which is the command's (perf re-raises its signal). */
static int record(const struct perf_setup *setup, const struct perf_options *options, const char *data)
{
    size_t command_count = 0;
    while (options->command[command_count])
        command_count++;
    char call_graph[32];
    snprintf(call_graph, sizeof call_graph, "--call-graph=%s", options->call_graph);
    const char *fixed[] = {setup->perf, "record", "-q", "-e", setup->event, "-F", options->rate,
                           call_graph, "-o", data, "--"};
    size_t fixed_count = sizeof fixed / sizeof fixed[0];
    char **argv = calloc(fixed_count + command_count + 1, sizeof *argv);
    if (!argv)
        return -1;
    memcpy(argv, fixed, sizeof fixed);
    memcpy(argv + fixed_count, options->command, command_count * sizeof *argv);
    int code = tool_run(argv, -1);
    if (code < 0)
        fprintf(stderr, "memslope perf: cannot start %s: %s\n", setup->perf, strerror(errno));
    free(argv);
    return code;
}

/* Runs perf script on data into an unlinked temporary file and returns its
 * descriptor, or -1 after saying why. */
static int run_perf_script(const struct perf_setup *setup, const char *data)
{
    const char *tmpdir = getenv("TMPDIR");
    char *template = format_path("%s/memslope-perf-script.%ld.XXXXXX", tmpdir && *tmpdir ? tmpdir : "/tmp",
                                 (long)getpid());
    int fd = template ? mkstemp(template) : -1;
    if (fd < 0) {
        fprintf(stderr, "memslope perf: cannot create a temporary file in %s: %s (set TMPDIR)\n",
                tmpdir && *tmpdir ? tmpdir : "/tmp", strerror(errno));
        free(template);
        return -1;
    }
    unlink(template);
    free(template);
    char *argv[] = {setup->perf, "script", "-i", (char *)data, "-F",
                    "comm,pid,tid,time,event,ip,sym,dso,srcline", NULL};
    int code = tool_run(argv, fd);
    if (code != 0) {
        fprintf(stderr, "memslope perf: `perf script -i %s` failed (exit status %d); its message is above.\n"
                        "  The raw data is kept: try `perf report -i %s`.\n", data, code, data);
        close(fd);
        return -1;
    }
    return fd;
}

/* Parses the perf script text held in fd. */
static int parse_script_file(int fd, struct perf_profile *profile)
{
    struct stat st;
    if (fstat(fd, &st) != 0)
        return -1;
    if (st.st_size == 0)
        return perf_script_parse("", 0, profile);
    void *text = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (text == MAP_FAILED)
        return -1;
    int result = perf_script_parse(text, (size_t)st.st_size, profile);
    munmap(text, (size_t)st.st_size);
    return result;
}

/* Into profile (opened by output_file.h's rule), then put in place. */
static int write_profile_file(const struct perf_profile *profile, const struct perf_options *options,
                              struct output_file *file)
{
    char err[512];
    FILE *out = output_file_stream(file);
    int result = !out ? -1
                 : options->collapsed ? perf_write_collapsed(profile, out)
                                      : perf_write_speedscope(profile, options->command[0], out);
    if (result != 0) {
        fprintf(stderr, "memslope perf: cannot write %s: %s\n", file->path, strerror(errno));
        output_file_discard(file);
        return -1;
    }
    if (output_file_close(file, err, sizeof err) != 0) {
        fprintf(stderr, "memslope perf: %s\n", err);
        return -1;
    }
    return 0;
}

/* The output name: -o, else memslope.COMMAND.PID.speedscope.json (or
 * .collapsed.txt) with the pid of the profiled process. */
static char *output_path(const struct perf_options *options, const struct perf_profile *profile)
{
    if (options->output)
        return strdup(options->output);
    long pid = profile->thread_count > 0 ? profile->threads[0].pid : (long)getpid();
    return format_path(options->collapsed ? "memslope.%s.%ld.collapsed.txt" : "memslope.%s.%ld.speedscope.json",
                       command_basename(options->command[0]), pid);
}

static void report_summary(const struct perf_profile *profile, const struct perf_setup *setup,
                           const char *out, const char *data, const struct perf_options *options)
{
    if (profile->sample_count == 0)
        fprintf(stderr, "memslope perf: no samples were recorded: the command ran for less than one\n"
                        "  sampling period (--rate %s Hz), or was not on the CPU.\n", options->rate);
    fprintf(stderr, "memslope perf: %zu samples (%s) in %zu thread%s -> %s (raw perf data: %s)\n",
            profile->sample_count, setup->event, profile->thread_count,
            profile->thread_count == 1 ? "" : "s", out, data);
}

static int open_output(struct output_file *file, const char *path)
{
    char err[512];
    if (output_file_open(file, path, 0, err, sizeof err) == 0)
        return 0;
    fprintf(stderr, "memslope perf: %s\n", err);
    return -1;
}

/* After the command ran: perf script, parse, write the profile into
 * profile (opened before the command with -o; named after the profiled
 * pid now without), name the data after the output. Returns 0, or -1 after
 * saying why. */
static int convert(const struct perf_setup *setup, const struct perf_options *options, const char *data,
                   struct output_file *profile_file, char **out_path)
{
    int fd = run_perf_script(setup, data);
    if (fd < 0)
        return -1;
    struct perf_profile profile;
    int parsed = parse_script_file(fd, &profile);
    close(fd);
    if (parsed != 0) {
        fprintf(stderr, "memslope perf: cannot read perf script's output: %s\n", strerror(errno));
        return -1;
    }
    char *out = output_path(options, &profile);
    int result = -1;
    if (out && (profile_file->path || open_output(profile_file, out) == 0)) {
        /* Beside a profile written in place (-o -, a device) the data keeps its own name. */
        char *final_data = profile_file->kind == OUTPUT_NEW_FILE ? with_suffix(out, ".perf.data") : strdup(data);
        if (final_data && write_profile_file(&profile, options, profile_file) == 0) {
            /* Recorded before the pid was known: now name it after the output
             * (rename replaces whatever is at that name, never writes through it). */
            int renamed = strcmp(final_data, data) == 0 || rename(data, final_data) == 0;
            report_summary(&profile, setup, out, renamed ? final_data : data, options);
            result = 0;
        }
        free(final_data);
    }
    perf_profile_free(&profile);
    *out_path = out;
    return result;
}

/* perf's raw data, created here (a fresh file, never through a link) and
 * written by perf under that name: with -o, OUT.perf.data; else, or beside
 * a profile written in place, memslope.COMMAND.PID.perf.data. */
static char *create_data_file(const struct perf_options *options, const struct output_file *profile_file)
{
    char *name = profile_file->path && profile_file->kind == OUTPUT_NEW_FILE
                     ? with_suffix(options->output, ".perf.data")
                     : format_path("memslope.%s.%ld.perf.data", command_basename(options->command[0]), (long)getpid());
    struct output_file data_file;
    char err[512];
    if (!name)
        return NULL;
    int opened = output_file_open(&data_file, name, 0, err, sizeof err) == 0;
    if (opened && data_file.kind != OUTPUT_NEW_FILE) {
        output_file_discard(&data_file);
        snprintf(err, sizeof err, "%s is a device or a FIFO; choose another path with -o", name);
        opened = 0;
    }
    if (!opened || output_file_close(&data_file, err, sizeof err) != 0) { /* empty: perf writes it by its name */
        fprintf(stderr, "memslope perf: cannot keep perf's raw data: %s\n", err);
        free(name);
        return NULL;
    }
    return name;
}

static int data_was_written(const char *data)
{
    struct stat st;
    return stat(data, &st) == 0 && st.st_size > 0;
}

static int record_and_convert(const struct perf_setup *setup, const struct perf_options *options)
{
    struct output_file profile_file = {.fd = -1};
    if (options->output && open_output(&profile_file, options->output) != 0)
        return 1;
    char *data = create_data_file(options, &profile_file);
    if (!data) {
        output_file_discard(&profile_file);
        return 1;
    }
    int status = record(setup, options, data);
    if (status < 0 || !data_was_written(data)) {
        if (status >= 0)
            fprintf(stderr, "memslope perf: perf record wrote no data (exit status %d); its message is above.\n",
                    status);
        output_file_discard(&profile_file);
        unlink(data);
        free(data);
        return 1;
    }
    char *out = NULL;
    int converted = convert(setup, options, data, &profile_file, &out);
    if (converted != 0)
        output_file_discard(&profile_file);
    if (converted == 0 && options->open)
        tool_open_artifact(out, ARTIFACT_SPEEDSCOPE);
    free(out);
    free(data);
    /* The command's status is what scripts wait for; a failed conversion
     * must not look like success, though. */
    return converted != 0 && status == 0 ? 1 : status;
}

int cmd_perf(int argc, char **argv)
{
    struct perf_options options;
    int parsed = parse_perf_options(argc, argv, &options);
    if (parsed != OPTIONS_RUN)
        return parsed;
    char *command = tool_find_in_path(options.command[0]);
    if (!command) {
        fprintf(stderr, "memslope perf: cannot run %s: no such executable%s; check its name and PATH.\n",
                options.command[0], strchr(options.command[0], '/') ? "" : " on PATH");
        return 127;
    }
    free(command);
    struct perf_setup setup = {0};
    int result = probe_perf(&setup);
    if (result == 0)
        result = record_and_convert(&setup, &options);
    free(setup.perf);
    return result;
}
