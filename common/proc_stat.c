/* proc_stat.c - see proc_stat.h. */
#include "proc_stat.h"

#include <stdio.h>
#include <string.h>

int proc_stat_read(pid_t pid, struct proc_stat *fields)
{
    char path[64], text[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *file = fopen(path, "re");
    size_t n = file ? fread(text, 1, sizeof text - 1, file) : 0;
    if (file)
        fclose(file);
    text[n] = '\0';
    /* the name, in parentheses, may hold spaces and parentheses itself:
     * the fields start after the last ')' */
    const char *after_name = strrchr(text, ')');
    unsigned long long flags;
    char state;
    if (!after_name || sscanf(after_name + 1, " %c %*d %*d %*d %*d %*d %llu", &state, &flags) != 2)
        return -1;
    fields->state = state;
    fields->flags = flags;
    return 0;
}

void proc_status_field(pid_t pid, const char *name, char *value, size_t size)
{
    char path[64], line[256];
    if (pid)
        snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    else
        snprintf(path, sizeof path, "/proc/self/status");
    value[0] = '\0';
    FILE *file = fopen(path, "re");
    size_t length = strlen(name);
    while (file && fgets(line, sizeof line, file))
        if (strncmp(line, name, length) == 0 && line[length] == ':') {
            snprintf(value, size, "%s", line + length + 1 + strspn(line + length + 1, " \t"));
            value[strcspn(value, "\n")] = '\0';
            break;
        }
    if (file)
        fclose(file);
}
