/*
 * test_elf_load_bias.c - elf_load_bias (tracer/symbols/elf_symbols.c) takes a
 * library's load bias from its executable mapping, never from another
 * mapping of the same file: the shim's libelf maps a file whole, read-only
 * from offset 0, to read its call-frame information, and that mapping may
 * lie below the library's own (a bias taken from it planted the case-end
 * breakpoint on memslope_case_end at a wrong address).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <dlfcn.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../tracer/symbols/elf_symbols.h"
#include "../../common/proc_maps.h"

/* The path and load bias of the object that defines a function of libcmocka. */
static void cmocka_load(char *path, size_t size, uint64_t *bias)
{
    Dl_info info;
    struct link_map *map = NULL;
    assert_true(dladdr1((void *)&_cmocka_run_group_tests, &info, (void **)&map, RTLD_DL_LINKMAP));
    assert_non_null(map);
    assert_non_null(realpath(info.dli_fname, path));
    assert_true(strlen(path) < size);
    *bias = map->l_addr;
}

/* The process's maps with extra mappings of path added, read-only from
 * file offset 0 (as libelf maps a file), at each of the given addresses. */
static void maps_with_strays(struct proc_maps *maps, const char *path, const uint64_t *starts, size_t count)
{
    assert_int_equal(proc_maps_read(getpid(), maps), 0);
    struct proc_map *grown = realloc(maps->maps, (maps->count + count) * sizeof *grown);
    assert_non_null(grown);
    maps->maps = grown;
    for (size_t i = 0; i < count; i++) {
        struct proc_map *stray = &maps->maps[maps->count++];
        *stray = (struct proc_map){starts[i], starts[i] + 0x40000, 0, 0, PROC_MAP_READ, strdup(path)};
        assert_non_null(stray->path);
    }
    qsort(maps->maps, maps->count, sizeof *maps->maps, proc_map_compare_start);
}

static void test_bias_of_a_library_as_loaded(void **state)
{
    (void)state;
    char path[4096];
    uint64_t expected, bias = 0;
    cmocka_load(path, sizeof path, &expected);
    struct proc_maps maps;
    assert_int_equal(proc_maps_read(getpid(), &maps), 0);
    assert_int_equal(elf_load_bias(&maps, path, &bias), 0);
    assert_true(bias == expected);
    proc_maps_free(&maps);
}

static void test_a_second_read_only_mapping_is_not_the_load(void **state)
{
    (void)state;
    char path[4096];
    uint64_t expected, bias = 0;
    cmocka_load(path, sizeof path, &expected);
    const uint64_t below_and_above[] = {0x10000, 0x7ff000000000ull};
    struct proc_maps maps;
    maps_with_strays(&maps, path, below_and_above, 2);
    assert_int_equal(elf_load_bias(&maps, path, &bias), 0);
    assert_true(bias == expected);
    proc_maps_free(&maps);
}

static void test_no_code_mapped_is_no_bias(void **state)
{
    (void)state;
    char path[4096];
    uint64_t expected, bias = 0;
    cmocka_load(path, sizeof path, &expected);
    struct proc_maps maps = {NULL, 0};
    const uint64_t stray[] = {0x10000};
    struct proc_map only = {stray[0], stray[0] + 0x40000, 0, 0, PROC_MAP_READ, path};
    maps.maps = &only;
    maps.count = 1;
    assert_int_equal(elf_load_bias(&maps, path, &bias), -1); /* only a read-only copy: no load */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bias_of_a_library_as_loaded),
        cmocka_unit_test(test_a_second_read_only_mapping_is_not_the_load),
        cmocka_unit_test(test_no_code_mapped_is_no_bias),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
