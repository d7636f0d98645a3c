/* test_output_file.c - the one rule every -o follows (common/output_file.h):
 * what each kind of path becomes, where a new file is put, links of one's
 * own followed and another user's refused, a regular file replaced only
 * when published, and a locked file refused to a second exclusive writer. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../common/output_file.h"

static char folder[] = "/tmp/memslope-output-test.XXXXXX";

static int make_folder(void **state)
{
    (void)state;
    return mkdtemp(folder) ? 0 : -1;
}

static int remove_folder(void **state)
{
    (void)state;
    char command[128];
    snprintf(command, sizeof command, "rm -rf '%s'", folder);
    return system(command) == 0 ? 0 : -1;
}

static char *in_folder(const char *name)
{
    static char path[4][256];
    static int next;
    char *slot = path[next++ % 4];
    snprintf(slot, sizeof path[0], "%s/%s", folder, name);
    return slot;
}

static void write_text(const char *path, const char *text)
{
    FILE *file = fopen(path, "w");
    assert_non_null(file);
    fputs(text, file);
    fclose(file);
}

static char *read_text(const char *path)
{
    static char text[256];
    FILE *file = fopen(path, "r");
    if (!file)
        return NULL;
    size_t n = fread(text, 1, sizeof text - 1, file);
    text[n] = '\0';
    fclose(file);
    return text;
}

static enum output_kind kind_of(const char *path)
{
    enum output_kind kind;
    char err[512];
    assert_int_equal(output_file_classify(path, &kind, err, sizeof err), 0);
    return kind;
}

static void test_kinds(void **state)
{
    (void)state;
    assert_int_equal(kind_of("-"), OUTPUT_STANDARD_OUTPUT);
    assert_int_equal(kind_of(in_folder("absent")), OUTPUT_NEW_FILE);
    write_text(in_folder("regular"), "x");
    assert_int_equal(kind_of(in_folder("regular")), OUTPUT_NEW_FILE);
    assert_int_equal(kind_of("/dev/null"), OUTPUT_IN_PLACE);
    assert_int_equal(kind_of(folder), OUTPUT_DIRECTORY);
    assert_int_equal(symlink("/dev/null", in_folder("to-null")), 0);
    assert_int_equal(kind_of(in_folder("to-null")), OUTPUT_IN_PLACE);
    assert_int_equal(symlink("nowhere", in_folder("dangling")), 0);
    assert_int_equal(kind_of(in_folder("dangling")), OUTPUT_NEW_FILE);
    enum output_kind kind;
    char err[512];
    assert_int_equal(output_file_classify("", &kind, err, sizeof err), -1);
}

/* A new file is invisible at the path until published, then replaces it. */
static void test_new_file_published(void **state)
{
    (void)state;
    const char *path = in_folder("report.txt");
    write_text(path, "old");
    struct output_file output;
    char err[512];
    assert_int_equal(output_file_open(&output, path, 0, err, sizeof err), 0);
    assert_int_equal(output.kind, OUTPUT_NEW_FILE);
    assert_int_equal(write(output.fd, "new", 3), 3);
    assert_string_equal(read_text(path), "old");
    assert_int_equal(output_file_close(&output, err, sizeof err), 0);
    assert_string_equal(read_text(path), "new");
}

/* Whether some descriptor of this process is open on the file (device
 * and inode: a pipe on fd 0 may share an inode number). */
static int file_open(const struct stat *file)
{
    for (int fd = 0; fd < 1024; fd++) {
        struct stat status;
        if (fstat(fd, &status) == 0 && status.st_dev == file->st_dev && status.st_ino == file->st_ino)
            return 1;
    }
    return 0;
}

/* A large file replaced by a publish is let go of by a thread of its own
 * (output_file.c, hold_replaced): the path names the new file at once, and
 * the old one is closed soon after, never kept open. (When it is let go
 * of is timing, not a result: performance.md measures it.) */
static void test_large_replaced_file_let_go(void **state)
{
    (void)state;
    const char *path = in_folder("big.trace");
    FILE *big = fopen(path, "w");
    assert_non_null(big);
    static const char kibibyte[1024];
    for (int i = 0; i < 1024; i++)
        assert_int_equal(fwrite(kibibyte, 1, sizeof kibibyte, big), sizeof kibibyte); /* 1 MiB: kept */
    assert_int_equal(fclose(big), 0);
    struct stat old;
    assert_int_equal(stat(path, &old), 0);
    struct output_file output;
    char err[512];
    assert_int_equal(output_file_open(&output, path, 0, err, sizeof err), 0);
    assert_int_equal(write(output.fd, "new", 3), 3);
    assert_int_equal(output_file_close(&output, err, sizeof err), 0);
    assert_string_equal(read_text(path), "new");
    int waited_ms = 0;
    while (file_open(&old) && waited_ms < 5000) {
        usleep(1000);
        waited_ms++;
    }
    assert_false(file_open(&old));
}

/* A FIFO that took the path between the open and the publish is replaced
 * without being opened (hold_replaced looks with O_PATH): a writer blocked
 * in its open stays blocked, as with no memslope there. */
static void test_fifo_at_publish_left_alone(void **state)
{
    (void)state;
    const char *path = in_folder("fifo.trace");
    struct output_file output;
    char err[512];
    assert_int_equal(output_file_open(&output, path, 0, err, sizeof err), 0);
    assert_int_equal(mkfifo(path, 0600), 0);
    pid_t writer = fork();
    assert_true(writer >= 0);
    if (writer == 0) {
        int fd = open(path, O_WRONLY); /* blocks until a reader opens the FIFO */
        _exit(fd >= 0 ? 0 : 1);
    }
    usleep(50000); /* the writer is in its open */
    assert_int_equal(output_file_close(&output, err, sizeof err), 0);
    usleep(200000);
    int status;
    assert_int_equal(waitpid(writer, &status, WNOHANG), 0); /* still blocked: nobody opened it */
    kill(writer, SIGKILL);
    assert_int_equal(waitpid(writer, &status, 0), writer);
    struct stat now;
    assert_int_equal(stat(path, &now), 0);
    assert_true(S_ISREG(now.st_mode));
}

/* Discarded before publishing: the path keeps what it had, no file left. */
static void test_new_file_discarded(void **state)
{
    (void)state;
    const char *path = in_folder("kept.txt");
    write_text(path, "old");
    struct output_file output;
    char err[512];
    assert_int_equal(output_file_open(&output, path, 0, err, sizeof err), 0);
    char temp[512];
    snprintf(temp, sizeof temp, "%s", output.temp_path);
    output_file_discard(&output);
    assert_string_equal(read_text(path), "old");
    assert_int_equal(access(temp, F_OK), -1);
}

/* One's own link to a regular file: the file at its end is replaced, the
 * link stays. */
static void test_own_link_kept(void **state)
{
    (void)state;
    write_text(in_folder("target.txt"), "old");
    assert_int_equal(symlink("target.txt", in_folder("link.txt")), 0);
    struct output_file output;
    char err[512];
    assert_int_equal(output_file_open(&output, in_folder("link.txt"), 0, err, sizeof err), 0);
    assert_int_equal(write(output.fd, "new", 3), 3);
    assert_int_equal(output_file_close(&output, err, sizeof err), 0);
    struct stat status;
    assert_int_equal(lstat(in_folder("link.txt"), &status), 0);
    assert_true(S_ISLNK(status.st_mode));
    assert_string_equal(read_text(in_folder("target.txt")), "new");
}

/* A link another user owns is refused, and so is a chain through one. */
static void test_foreign_link_refused(void **state)
{
    (void)state;
    if (geteuid() != 0)
        skip(); /* making a link another user owns takes root */
    write_text(in_folder("victim"), "precious");
    assert_int_equal(symlink("victim", in_folder("planted")), 0);
    assert_int_equal(lchown(in_folder("planted"), 65534, 65534), 0);
    assert_int_equal(symlink("planted", in_folder("mine")), 0);
    struct output_file output;
    char err[512];
    assert_int_equal(output_file_open(&output, in_folder("planted"), 0, err, sizeof err), -1);
    assert_non_null(strstr(err, "symbolic link owned by another user (uid 65534)"));
    assert_int_equal(output_file_open(&output, in_folder("mine"), 0, err, sizeof err), -1);
    assert_string_equal(read_text(in_folder("victim")), "precious");
}

/* A device is written where it is. */
static void test_device_in_place(void **state)
{
    (void)state;
    struct output_file output;
    char err[512];
    assert_int_equal(output_file_open(&output, "/dev/null", 0, err, sizeof err), 0);
    assert_int_equal(output.kind, OUTPUT_IN_PLACE);
    assert_null(output.temp_path);
    assert_int_equal(write(output.fd, "x", 1), 1);
    assert_int_equal(output_file_close(&output, err, sizeof err), 0);
    struct stat status;
    assert_int_equal(stat("/dev/null", &status), 0);
    assert_true(S_ISCHR(status.st_mode));
}

/* An exclusive writer's published file: a second exclusive writer is
 * refused while the first holds it; still_there tells when it was replaced. */
static void test_exclusive(void **state)
{
    (void)state;
    const char *path = in_folder("shared.trace");
    struct output_file first, second;
    char err[512];
    assert_int_equal(output_file_open(&first, path, OUTPUT_EXCLUSIVE, err, sizeof err), 0);
    assert_int_equal(output_file_publish(&first, err, sizeof err), 0);
    assert_int_equal(output_file_still_there(&first), 1);
    assert_int_equal(output_file_open(&second, path, OUTPUT_EXCLUSIVE, err, sizeof err), -1);
    assert_non_null(strstr(err, "being written by another memslope"));
    write_text(in_folder("other"), "other");
    assert_int_equal(rename(in_folder("other"), path), 0);
    assert_int_equal(output_file_still_there(&first), 0);
    assert_int_equal(output_file_close(&first, err, sizeof err), 0);
    assert_int_equal(output_file_open(&second, path, OUTPUT_EXCLUSIVE, err, sizeof err), 0);
    output_file_discard(&second);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kinds),
        cmocka_unit_test(test_new_file_published),
        cmocka_unit_test(test_new_file_discarded),
        cmocka_unit_test(test_large_replaced_file_let_go),
        cmocka_unit_test(test_fifo_at_publish_left_alone),
        cmocka_unit_test(test_own_link_kept),
        cmocka_unit_test(test_foreign_link_refused),
        cmocka_unit_test(test_device_in_place),
        cmocka_unit_test(test_exclusive),
    };
    return cmocka_run_group_tests(tests, make_folder, remove_folder);
}
