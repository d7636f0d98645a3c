/*
 * test_elf_lookup.c - shm_find_function (preload/elf_lookup.c): a
 * function's first definition among the loaded objects, read from their
 * GNU hash tables, as the shim finds the next C++ operator and the freeres
 * functions.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <dlfcn.h>
#include <link.h>
#include <string.h>

#include "../../preload/elf_lookup.h"

struct text_range {
    const void *address;
    uintptr_t start, end;
};

static int find_text(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    struct text_range *range = data;
    for (unsigned i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *phdr = &info->dlpi_phdr[i];
        uintptr_t start = info->dlpi_addr + phdr->p_vaddr;
        if (phdr->p_type == PT_LOAD && (phdr->p_flags & PF_X) && (uintptr_t)range->address >= start &&
            (uintptr_t)range->address < start + phdr->p_memsz) {
            range->start = start;
            range->end = start + phdr->p_memsz;
            return 1;
        }
    }
    return 0;
}

/* The executable segment of the object that holds address. */
static struct text_range text_of(const void *address)
{
    struct text_range range = {address, 0, 0};
    dl_iterate_phdr(find_text, &range);
    assert_true(range.end > range.start);
    return range;
}

static void test_finds_what_the_loader_finds(void **state)
{
    (void)state;
    static const char *const names[] = {"_cmocka_run_group_tests", "dladdr", "strchr", "__libc_freeres"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        void *expected = dlsym(RTLD_DEFAULT, names[i]);
        assert_non_null(expected);
        assert_ptr_equal(shm_find_function(names[i], 0, 0), expected);
    }
}

static void test_skipping_an_object_finds_the_next_definition(void **state)
{
    (void)state;
    /* malloc: the sanitizer runtime's first (loaded before libc), then libc's. */
    void *first = shm_find_function("malloc", 0, 0);
    assert_ptr_equal(first, dlsym(RTLD_DEFAULT, "malloc"));
    struct text_range range = text_of(first);
    void *next = shm_find_function("malloc", range.start, range.end);
    assert_non_null(next);
    assert_ptr_not_equal(next, first);
    Dl_info info;
    assert_true(dladdr(next, &info));
    assert_non_null(strstr(info.dli_fname, "libc.so"));
    /* Defined in one object only: skipping it leaves nothing. */
    void *only = shm_find_function("_cmocka_run_group_tests", 0, 0);
    range = text_of(only);
    assert_null(shm_find_function("_cmocka_run_group_tests", range.start, range.end));
}

static void test_only_defined_functions(void **state)
{
    (void)state;
    assert_null(shm_find_function("memslope_no_such_function_anywhere", 0, 0));
    assert_null(shm_find_function("environ", 0, 0));   /* an object, not a function */
    assert_null(shm_find_function("stdout", 0, 0));
    assert_null(shm_find_function("", 0, 0));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_finds_what_the_loader_finds),
        cmocka_unit_test(test_skipping_an_object_finds_the_next_definition),
        cmocka_unit_test(test_only_defined_functions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
