/* demangle.c - see demangle.h. */
#include "demangle.h"

#include <stdlib.h>
#include <string.h>

/* From libstdc++ (the C++ ABI); declared here to keep this a C file. */
char *__cxa_demangle(const char *mangled_name, char *output_buffer, size_t *length, int *status);

char *demangle_cxx(const char *name)
{
    if (!name || strncmp(name, "_Z", 2) != 0)
        return NULL;
    int status = 0;
    char *demangled = __cxa_demangle(name, NULL, NULL, &status);
    if (status != 0) {
        free(demangled);
        return NULL;
    }
    return demangled;
}
