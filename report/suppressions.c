/* suppressions.c - see suppressions.h. */
#include "../common/growable_array.h"
#include "suppressions.h"

#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "../common/demangle.h"
#include "attribution.h"

#define ALL_KINDS ((1u << TRACE_LEAK_CATEGORIES) - 1)

/* --- wildcards ------------------------------------------------------------------- */

bool suppressions_glob_match(const char *pattern, const char *text, bool question_mark)
{
    const char *star = NULL, *resume = NULL;
    while (*text) {
        if (*pattern == '*') {
            star = pattern++;
            resume = text;
        } else if (*pattern == *text || (question_mark && *pattern == '?')) {
            pattern++;
            text++;
        } else if (star) {
            /* Let the last '*' take one more character and try again from there. */
            pattern = star + 1;
            text = ++resume;
        } else {
            return false;
        }
    }
    while (*pattern == '*')
        pattern++;
    return *pattern == '\0';
}

/* --- the set ------------------------------------------------------------------------ */

/* The names memcheck gives the allocator frame at the top of a leak's stack. */
static const char *const allocator_entry_points[] = {
    "malloc", "calloc", "realloc", "reallocarray", "memalign", "posix_memalign", "aligned_alloc", "valloc",
    "pvalloc", "_Znwm", "_Znam", "_ZnwmRKSt9nothrow_t", "_ZnamRKSt9nothrow_t", "_ZnwmSt11align_val_t",
    "_ZnamSt11align_val_t", "_ZnwmSt11align_val_tRKSt9nothrow_t", "_ZnamSt11align_val_tRKSt9nothrow_t",
};

#define ENTRY_POINT_COUNT (sizeof allocator_entry_points / sizeof *allocator_entry_points)

const char *suppressions_mangled_allocator(const char *demangled)
{
    for (size_t i = 0; i < ENTRY_POINT_COUNT; i++) {
        char *name = demangle_cxx(allocator_entry_points[i]);
        bool same = name && strcmp(name, demangled) == 0;
        free(name);
        if (same)
            return allocator_entry_points[i];
    }
    return NULL;
}

int suppressions_init(struct suppressions *set)
{
    memset(set, 0, sizeof *set);
    set->allocator_names = calloc(2 * ENTRY_POINT_COUNT, sizeof *set->allocator_names);
    if (!set->allocator_names)
        return -1;
    for (size_t i = 0; i < ENTRY_POINT_COUNT; i++) {
        char *name = strdup(allocator_entry_points[i]);
        if (!name)
            return -1;
        set->allocator_names[set->allocator_name_count++] = name;
        char *demangled = demangle_cxx(name);
        if (demangled)
            set->allocator_names[set->allocator_name_count++] = demangled;
    }
    return 0;
}

static void free_suppression(struct suppression *s)
{
    free(s->name);
    free(s->lsan_pattern);
    for (size_t i = 0; i < s->location_count; i++) {
        free(s->locations[i].pattern);
        free(s->locations[i].demangled);
    }
    free(s->locations);
}

static void free_strings(char **strings, size_t count)
{
    for (size_t i = 0; i < count; i++)
        free(strings[i]);
    free(strings);
}

void suppressions_free(struct suppressions *set)
{
    for (size_t i = 0; i < set->count; i++)
        free_suppression(&set->items[i]);
    free(set->items);
    free_strings(set->files, set->file_count);
    free_strings(set->allocator_names, set->allocator_name_count);
    free_strings(set->warnings, set->warning_count);
    memset(set, 0, sizeof *set);
}

static int append_string(char ***strings, size_t *count, char *string)
{
    char **grown = string ? realloc(*strings, (*count + 1) * sizeof *grown) : NULL;
    if (!grown) {
        free(string);
        return -1;
    }
    *strings = grown;
    grown[(*count)++] = string;
    return 0;
}

static int add_suppression(struct suppressions *set, const struct suppression *s)
{
    if (growable_array_reserve(&set->items, &set->capacity, set->count + 1, sizeof *set->items) < 0)
        return -1;
    set->items[set->count++] = *s;
    return 0;
}

/* --- reading ------------------------------------------------------------------------ */

struct reader {
    char *text; /* a NUL-terminated copy, cut into lines as it is read */
    char *next;
    unsigned line; /* of the line last returned */
    const char *name;
    char *err;
    size_t err_size;
    unsigned mangled_wildcards, first_mangled_wildcard;
};

static char *trim(char *s)
{
    while (*s == ' ' || *s == '\t' || *s == '\r')
        s++;
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r'))
        s[--n] = '\0';
    return s;
}

/* The next line that is neither blank nor a comment, trimmed; NULL at the end. */
static char *next_line(struct reader *r)
{
    while (r->next) {
        char *line = r->next, *newline = strchr(line, '\n');
        r->next = newline ? newline + 1 : NULL;
        if (newline)
            *newline = '\0';
        r->line++;
        line = trim(line);
        if (*line && *line != '#')
            return line;
    }
    return NULL;
}

__attribute__((format(printf, 2, 3))) static int parse_error(struct reader *r, const char *format, ...)
{
    int used = snprintf(r->err, r->err_size, "%s:%u: ", r->name, r->line);
    va_list args;
    va_start(args, format);
    if (used >= 0 && (size_t)used < r->err_size)
        vsnprintf(r->err + used, r->err_size - (size_t)used, format, args);
    va_end(args);
    return -1;
}

static int out_of_memory(struct reader *r)
{
    snprintf(r->err, r->err_size, "%s: out of memory reading the suppressions", r->name);
    return -1;
}

/* "definite,indirect" -> kind bits; -1 for a word memcheck does not know. */
static int parse_kinds(struct reader *r, const char *list, unsigned *kinds)
{
    static const char *const words[TRACE_LEAK_CATEGORIES] = {"definite", "indirect", "possible", "reachable"};
    *kinds = 0;
    char copy[256];
    snprintf(copy, sizeof copy, "%s", list);
    for (char *save = NULL, *word = strtok_r(copy, ", \t", &save); word; word = strtok_r(NULL, ", \t", &save)) {
        int known = 0;
        for (unsigned c = 0; c < TRACE_LEAK_CATEGORIES; c++)
            if (strcmp(word, words[c]) == 0) {
                *kinds |= 1u << c;
                known = 1;
            }
        if (strcmp(word, "all") == 0)
            *kinds = ALL_KINDS;
        else if (strcmp(word, "none") != 0 && !known)
            return parse_error(r, "match-leak-kinds: unknown kind '%s' (valid: definite, indirect, possible, "
                                  "reachable, all, none)", word);
    }
    return 0;
}

static bool has_wildcard(const char *pattern)
{
    return strpbrk(pattern, "*?") != NULL;
}

/* "fun:P", "obj:P", "src:P[:LINE]" or "..." into location. */
static int parse_location(struct reader *r, const char *text, struct suppression_location *location)
{
    memset(location, 0, sizeof *location);
    if (strcmp(text, "...") == 0) {
        location->kind = SUPPRESSION_ANY_FRAMES;
        return 0;
    }
    if (strncmp(text, "fun:", 4) == 0)
        location->kind = SUPPRESSION_FUN;
    else if (strncmp(text, "obj:", 4) == 0)
        location->kind = SUPPRESSION_OBJ;
    else if (strncmp(text, "src:", 4) == 0)
        location->kind = SUPPRESSION_SRC;
    else
        return parse_error(r, "'%s' is not a frame (expected fun:NAME, obj:PATH, src:FILE or ..., or '}' to end "
                              "the suppression)", text);
    if (!(location->pattern = strdup(text + 4)))
        return out_of_memory(r);
    char *colon = location->kind == SUPPRESSION_SRC ? strrchr(location->pattern, ':') : NULL;
    if (colon && colon[1] && strspn(colon + 1, "0123456789") == strlen(colon + 1)) {
        location->line = (uint32_t)strtoul(colon + 1, NULL, 10);
        *colon = '\0';
    }
    if (location->kind == SUPPRESSION_FUN && strncmp(location->pattern, "_Z", 2) == 0) {
        if (!has_wildcard(location->pattern)) {
            location->demangled = demangle_cxx(location->pattern);
        } else if (r->mangled_wildcards++ == 0) {
            r->first_mangled_wildcard = r->line;
        }
    }
    return 0;
}

/* The lines of an entry after its tool line, up to '}': for a leak
 * suppression its kinds and locations; anything else is skipped. */
static int parse_valgrind_body(struct reader *r, struct suppression *s, bool is_leak)
{
    const char *line;
    size_t capacity = 0;
    while ((line = next_line(r)) && strcmp(line, "}") != 0) {
        if (!is_leak)
            continue; /* another tool's, or another kind of error: its extra lines mean nothing here */
        if (strncmp(line, "match-leak-kinds:", 17) == 0 && s->location_count == 0) {
            if (parse_kinds(r, line + 17, &s->kinds) != 0)
                return -1;
            continue;
        }
        if (s->location_count == capacity) {
            capacity = capacity ? 2 * capacity : 8;
            struct suppression_location *grown = realloc(s->locations, capacity * sizeof *grown);
            if (!grown)
                return out_of_memory(r);
            s->locations = grown;
        }
        if (parse_location(r, line, &s->locations[s->location_count]) != 0)
            return -1;
        s->location_count++;
    }
    if (!line) {
        snprintf(r->err, r->err_size, "%s: the file ends inside the suppression '%s' that begins at line %u (add its "
                                      "closing '}')", r->name, s->name, s->line);
        return -1;
    }
    if (is_leak && s->location_count == 0)
        return parse_error(r, "the suppression '%s' names no frame (add fun:, obj: or ... lines)", s->name);
    return 0;
}

/* "Memcheck:Leak", or "Memcheck,Addrcheck:Leak": a leak suppression? */
static int is_memcheck_leak(struct reader *r, const char *line, bool *is_leak)
{
    const char *colon = strchr(line, ':');
    if (!colon)
        return parse_error(r, "'%s' is not a TOOL:KIND line (for a leak: Memcheck:Leak)", line);
    *is_leak = false;
    if (strcmp(colon + 1, "Leak") != 0)
        return 0;
    for (const char *tool = line; tool < colon;) {
        size_t length = strcspn(tool, ",:");
        if (length == 8 && strncasecmp(tool, "memcheck", 8) == 0)
            *is_leak = true;
        tool += length + (tool[length] == ',');
    }
    return 0;
}

static int parse_valgrind(struct suppressions *set, struct reader *r, const char *file, bool is_default)
{
    const char *line;
    while ((line = next_line(r))) {
        if (strcmp(line, "{") != 0)
            return parse_error(r, "expected '{' to begin a suppression, found '%s' (Valgrind's format: "
                                  "{ NAME  Memcheck:Leak  fun:... })", line);
        struct suppression s = {.format = SUPPRESSION_FORMAT_VALGRIND, .file = file, .line = r->line,
                                .kinds = ALL_KINDS, .is_default = is_default};
        const char *name = next_line(r);
        const char *tool = name && strcmp(name, "}") != 0 ? next_line(r) : NULL;
        bool is_leak = false;
        int rc = 0;
        if (!tool || strcmp(tool, "}") == 0)
            rc = parse_error(r, "the suppression that begins at line %u needs a name and a TOOL:KIND line "
                                "(Memcheck:Leak) before its frames", s.line);
        else if (!(s.name = strdup(name)))
            rc = out_of_memory(r);
        else
            rc = is_memcheck_leak(r, tool, &is_leak);
        if (rc == 0)
            rc = parse_valgrind_body(r, &s, is_leak);
        if (rc == 0 && is_leak && add_suppression(set, &s) != 0)
            rc = out_of_memory(r);
        else if (rc != 0 || !is_leak)
            free_suppression(&s);
        if (rc != 0)
            return -1;
    }
    return 0;
}

/* LeakSanitizer's pattern as a glob: a substring unless anchored by ^ or $. */
static char *lsan_glob(const char *pattern)
{
    bool anchored_start = pattern[0] == '^';
    size_t length = strlen(pattern + anchored_start);
    bool anchored_end = length > 0 && pattern[anchored_start + length - 1] == '$';
    char *glob = malloc(length + 3);
    if (!glob)
        return NULL;
    snprintf(glob, length + 3, "%s%.*s%s", anchored_start ? "" : "*", (int)(length - anchored_end),
             pattern + anchored_start, anchored_end ? "" : "*");
    return glob;
}

static int parse_lsan(struct suppressions *set, struct reader *r, const char *file, bool is_default)
{
    char *line;
    while ((line = next_line(r))) {
        char *colon = strchr(line, ':');
        if (!colon || colon == line)
            return parse_error(r, "'%s' is not a TYPE:PATTERN line (LeakSanitizer's format: leak:PATTERN; "
                                  "Valgrind's begins with '{')", line);
        *colon = '\0';
        if (strcmp(line, "leak") != 0)
            continue; /* another sanitizer's (race:, signal:, ...) */
        const char *pattern = trim(colon + 1);
        if (!*pattern)
            return parse_error(r, "leak: needs a pattern (a function, source file or module name)");
        struct suppression s = {.format = SUPPRESSION_FORMAT_LSAN, .file = file, .line = r->line,
                                .kinds = ALL_KINDS, .is_default = is_default};
        s.name = strdup(pattern);
        s.lsan_pattern = lsan_glob(pattern);
        if (!s.name || !s.lsan_pattern || add_suppression(set, &s) != 0) {
            free_suppression(&s);
            return out_of_memory(r);
        }
    }
    return 0;
}

/* Valgrind's files begin with '{'; LeakSanitizer's never do. */
static bool looks_like_valgrind(const char *text)
{
    for (const char *line = text; line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        line += strspn(line, " \t\r");
        if (*line == '\n' || *line == '#')
            continue;
        return *line == '{';
    }
    return false;
}

static int note_mangled_wildcards(struct suppressions *set, const struct reader *r)
{
    if (!r->mangled_wildcards)
        return 0;
    char *warning = NULL;
    if (asprintf(&warning,
                 "%s: %u fun: line%s use%s a mangled C++ name with a wildcard (the first at line %u); memslope's "
                 "traces keep demangled names, so such a line only matches a name the trace left mangled: write "
                 "it demangled (fun:ns::Class::*)",
                 r->name, r->mangled_wildcards, r->mangled_wildcards == 1 ? "" : "s",
                 r->mangled_wildcards == 1 ? "s" : "", r->first_mangled_wildcard) < 0)
        return -1;
    return append_string(&set->warnings, &set->warning_count, warning);
}

int suppressions_parse(struct suppressions *set, const char *text, size_t length, const char *name, bool is_default,
                       char *err, size_t err_size)
{
    struct reader r = {.name = name, .err = err, .err_size = err_size};
    if (memchr(text, '\0', length)) {
        snprintf(err, err_size, "%s: not a suppression file (it holds a NUL byte)", name);
        return -1;
    }
    char *file = strdup(name);
    if (!file || append_string(&set->files, &set->file_count, file) != 0 || !(r.text = strndup(text, length)))
        return out_of_memory(&r);
    r.next = r.text;
    int rc = looks_like_valgrind(r.text) ? parse_valgrind(set, &r, file, is_default)
                                         : parse_lsan(set, &r, file, is_default);
    if (rc == 0 && note_mangled_wildcards(set, &r) != 0)
        rc = out_of_memory(&r);
    free(r.text);
    return rc;
}

int suppressions_load(struct suppressions *set, const char *path, bool is_default, char *err, size_t err_size)
{
    FILE *file = fopen(path, "re");
    if (!file) {
        snprintf(err, err_size, "%s: cannot read the suppressions: %s", path, strerror(errno));
        return -1;
    }
    char *text = NULL;
    size_t length = 0;
    FILE *buffer = open_memstream(&text, &length);
    char chunk[8192];
    size_t n;
    while (buffer && (n = fread(chunk, 1, sizeof chunk, file)) > 0)
        fwrite(chunk, 1, n, buffer);
    int failed = ferror(file);
    int saved = errno;
    fclose(file);
    if (!buffer || fclose(buffer) != 0 || failed) {
        snprintf(err, err_size, "%s: cannot read the suppressions: %s", path, failed ? strerror(saved) : "out of memory");
        free(text);
        return -1;
    }
    int rc = suppressions_parse(set, text, length, path, is_default, err, err_size);
    free(text);
    return rc;
}

int suppressions_default_path(char *path, size_t size)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n < 0)
        return -1;
    exe[n] = '\0';
    snprintf(path, size, "%s/../share/memslope/default.supp", dirname(exe));
    return 0;
}

int suppressions_load_all(struct suppressions *set, const char *const *files, size_t file_count,
                          bool without_default, char *err, size_t err_size)
{
    char path[PATH_MAX + 64], resolved[PATH_MAX];
    if (!without_default) {
        if (suppressions_default_path(path, sizeof path) == 0 && realpath(path, resolved) && access(resolved, R_OK) == 0) {
            if (suppressions_load(set, resolved, true, err, err_size) != 0)
                return -1;
        } else {
            char *warning = NULL;
            if (asprintf(&warning, "no default suppressions found (looked for share/memslope/default.supp beside "
                                   "memslope's bin/): reporting without them") < 0 ||
                append_string(&set->warnings, &set->warning_count, warning) != 0) {
                snprintf(err, err_size, "out of memory");
                return -1;
            }
        }
    }
    for (size_t i = 0; i < file_count; i++)
        if (suppressions_load(set, files[i], false, err, err_size) != 0)
            return -1;
    return 0;
}

/* --- matching ------------------------------------------------------------------------ */

/* One frame as the locations see it. frames[0] is the allocator entry point
 * the trace does not record (memcheck's first frame). */
struct match_frame {
    const char *function; /* "???" when unknown, as memcheck calls it; NULL for the implicit frame */
    const char *object;   /* module path; "" when none */
    const char *file;
    uint32_t line;
    bool optional; /* a recorded allocator frame: memcheck may see it or not */
    bool system;   /* outside the user's code (attribution.h) */
};

static size_t match_frames(const struct trace_model *model, const struct trace_model_stack *stack,
                           struct match_frame *frames)
{
    frames[0] = (struct match_frame){NULL, "", "", 0, false, true};
    for (uint32_t i = 0; i < stack->depth; i++) {
        const struct trace_model_frame *frame = &model->frames[stack->frame_ids[i]];
        frames[i + 1] = (struct match_frame){
            .function = *frame->function ? frame->function : "???",
            .object = frame->module ? frame->module->path : "",
            .file = frame->file,
            .line = frame->line,
            .optional = (frame->flags & TRACE_FRAME_ALLOCATOR) != 0,
            .system = !attribution_frame_is_user(frame),
        };
    }
    return (size_t)stack->depth + 1;
}

static bool function_matches(const struct suppression_location *location, const char *name)
{
    return suppressions_glob_match(location->pattern, name, true) ||
           (location->demangled && strcmp(location->demangled, name) == 0);
}

static bool location_matches(const struct suppressions *set, const struct suppression_location *location,
                             const struct match_frame *frame)
{
    switch (location->kind) {
    case SUPPRESSION_FUN:
        if (frame->function)
            return function_matches(location, frame->function);
        for (size_t i = 0; i < set->allocator_name_count; i++)
            if (function_matches(location, set->allocator_names[i]))
                return true;
        return false;
    case SUPPRESSION_OBJ:
        return suppressions_glob_match(location->pattern, frame->object, true);
    case SUPPRESSION_SRC: {
        const char *slash = strrchr(frame->file, '/');
        bool file = *frame->file && (suppressions_glob_match(location->pattern, frame->file, true) ||
                                     (slash && suppressions_glob_match(location->pattern, slash + 1, true)));
        return file && (location->line == 0 || location->line == frame->line);
    }
    case SUPPRESSION_ANY_FRAMES: return true;
    }
    return false;
}

/* Whether the locations match the frames from the top, as memcheck's do:
 * reached[p][f] says whether locations p.. match frames f.. (the stack may
 * go on after the last location). A default suppression may not reach past
 * a frame of the user's code. */
static bool valgrind_matches(const struct suppressions *set, const struct suppression *s,
                             const struct match_frame *frames, size_t frame_count)
{
    size_t columns = frame_count + 1;
    bool *reached = calloc((s->location_count + 1) * columns, sizeof *reached);
    if (!reached)
        return false;
    for (size_t f = 0; f <= frame_count; f++)
        reached[s->location_count * columns + f] = true;
    for (size_t p = s->location_count; p-- > 0;) {
        const struct suppression_location *location = &s->locations[p];
        for (size_t f = frame_count + 1; f-- > 0;) {
            bool may_pass = f < frame_count && (!s->is_default || frames[f].system);
            bool *here = &reached[p * columns + f];
            if (location->kind == SUPPRESSION_ANY_FRAMES)
                *here = reached[(p + 1) * columns + f] || (may_pass && reached[p * columns + f + 1]);
            else
                *here = may_pass && ((location_matches(set, location, &frames[f]) && reached[(p + 1) * columns + f + 1]) ||
                                     (frames[f].optional && reached[p * columns + f + 1]));
        }
    }
    bool matched = reached[0];
    free(reached);
    return matched;
}

static bool lsan_text_matches(const char *pattern, const char *text)
{
    return *text && suppressions_glob_match(pattern, text, false);
}

/* Any recorded frame's function, file or module; a default one only above
 * the user's code. */
static bool lsan_matches(const struct suppression *s, const struct match_frame *frames, size_t frame_count)
{
    for (size_t f = 1; f < frame_count; f++) {
        if (s->is_default && !frames[f].system)
            return false;
        bool named = strcmp(frames[f].function, "???") != 0;
        if ((named && lsan_text_matches(s->lsan_pattern, frames[f].function)) ||
            lsan_text_matches(s->lsan_pattern, frames[f].file) || lsan_text_matches(s->lsan_pattern, frames[f].object))
            return true;
    }
    return false;
}

const struct suppression *suppressions_match(const struct suppressions *set, const struct trace_model *model,
                                             const struct trace_model_stack *stack, uint32_t category)
{
    if (!set || !stack || set->count == 0 || category >= TRACE_LEAK_CATEGORIES)
        return NULL;
    struct match_frame *frames = malloc(((size_t)stack->depth + 1) * sizeof *frames);
    if (!frames)
        return NULL;
    size_t frame_count = match_frames(model, stack, frames);
    const struct suppression *found = NULL;
    for (size_t i = 0; i < set->count && !found; i++) {
        const struct suppression *s = &set->items[i];
        if (!(s->kinds & (1u << category)))
            continue;
        if (s->format == SUPPRESSION_FORMAT_LSAN ? lsan_matches(s, frames, frame_count)
                                                 : valgrind_matches(set, s, frames, frame_count))
            found = s;
    }
    free(frames);
    return found;
}
