/* tests/kit/test_regular.c — a file khost reads is opened only when it is a regular file, and what is not one (a
 * FIFO, a link to a device, a folder) is refused at once with its kind named, never read in a way that blocks:
 * kh_open_regular itself, and the readers of the kit that go through it (the text corpus, the IDX and CIFAR
 * readers). An alarm turns a hang into a failure. The FIFO and the link are made in the test's own folder. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "khost/kit/data_image.h"
#include "khost/kit/data_text.h"
#include "khost/kit/regular.h"
#include "testutil.h"

static void hung(int sig) {
    (void)sig;
    static const char msg[] = "test_regular: a read blocked on a file that is not regular\n";
    if (write(2, msg, sizeof msg - 1) < 0) _exit(1);
    _exit(1);
}

static void expect_refused(const char *path, const char *kind) {
    char why[512] = "";
    int fd = kh_open_regular(path, why, sizeof why);
    CHECK(fd < 0 && strstr(why, path) && strstr(why, kind), "%s refused as %s: fd %d, '%s'", path, kind, fd, why);
    if (fd >= 0) close(fd);
}

int main(void) {
    signal(SIGALRM, hung);
    alarm(20);
    const char *dir = kh_test_tmpdir("regular");
    char plain[1024], fifo[1024], zero[1024], missing[1024];
    snprintf(plain, sizeof plain, "%s/plain.txt", dir);
    snprintf(fifo, sizeof fifo, "%s/fifo", dir);
    snprintf(zero, sizeof zero, "%s/zero", dir);
    snprintf(missing, sizeof missing, "%s/missing", dir);
    kh_test_write_file(plain, "some text\n", 10);
    CHECK(mkfifo(fifo, 0600) == 0, "mkfifo: %s", strerror(errno));
    CHECK(symlink("/dev/zero", zero) == 0, "symlink: %s", strerror(errno));

    char why[512] = "";
    int fd = kh_open_regular(plain, why, sizeof why);
    CHECK(fd >= 0, "a regular file opens: %s", why);
    if (fd >= 0) {
        char buf[16];
        CHECK(read(fd, buf, sizeof buf) == 10 && (fcntl(fd, F_GETFL) & O_NONBLOCK) == 0 && (fcntl(fd, F_GETFD) & FD_CLOEXEC),
              "read in blocking mode, close-on-exec");
        close(fd);
    }
    expect_refused(fifo, "a FIFO");
    expect_refused(zero, "a character device");
    expect_refused(dir, "a directory");
    fd = kh_open_regular(missing, why, sizeof why);
    CHECK(fd < 0 && errno == ENOENT && strstr(why, "cannot open"), "missing: errno %d '%s'", errno, why);
    FILE *f = kh_fopen_regular(fifo, why, sizeof why);
    CHECK(!f && strstr(why, "a FIFO"), "the stdio form refuses a FIFO too: '%s'", why);
    if (f) fclose(f);

    /* the readers: a corpus, IDX files and a CIFAR batch that are FIFOs or a device */
    kh_charwin c;
    char err[1024] = "";
    kh_status st = kh_charwin_load(fifo, 40, 3, &c, err, sizeof err);
    CHECK(st == KH_ERR_IO && strstr(err, fifo) && strstr(err, "a FIFO"), "corpus as a FIFO: %d '%s'", st, err);
    st = kh_charwin_load(zero, 40, 3, &c, err, sizeof err);
    CHECK(st == KH_ERR_IO && strstr(err, "a character device"), "corpus as /dev/zero: %d '%s'", st, err);
    const char *paths[1] = {fifo};
    kh_images im;
    st = kh_cifar_bin_read(paths, 1, 0, &im, err, sizeof err);
    CHECK(st == KH_ERR_IO && strstr(err, fifo), "CIFAR batch as a FIFO: %d '%s'", st, err);
    st = kh_idx_read(fifo, plain, 0, &im, err, sizeof err);
    CHECK(st == KH_ERR_IO && strstr(err, fifo) && strstr(err, "a FIFO"), "IDX images as a FIFO: %d '%s'", st, err);
    return kh_test_finish("test_regular");
}
