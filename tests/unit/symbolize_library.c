/*
 * symbolize_library.c - a shared library for test_symbolize.c, built three
 * ways (see the Makefile): with its debug info in a separate file found
 * through .gnu_debuglink, stripped with only MiniDebugInfo (.gnu_debugdata),
 * and with -g but no build-id. Its one function of interest is static, so
 * no dynamic symbol names it: only the debug info or the MiniDebugInfo
 * symbol table can.
 */
#define NOINLINE __attribute__((noinline, noclone, used))

/* The line of the function's one statement: its first instruction is
 * there, or on the opening brace just above. */
int library_local_function_line = __LINE__ + 3;
NOINLINE static int library_local_function(int x)
{
    return x * 3 + 1;
}

void *library_local_function_address(void);
void *library_local_function_address(void)
{
    return (void *)&library_local_function;
}
