/*
 * diskfault: an LD_PRELOAD shim that makes a process's disk fail or slow down, for the
 * multi-process fault tests (tests/src/proc/disk_fault.rs compiles and loads it).
 *
 * It is a fault-injecting layer between the program and libc, NOT the kernel's block layer:
 * it changes what fsync, fdatasync, msync, sync_file_range, write, writev, pwrite and pwrite64
 * return (or how long they take) for files under one directory. It cannot model what a real failing disk
 * also does: writeback errors the kernel reports later (an fsync failing for data a write
 * already "completed", pages marked clean after a failed writeback, so a retried fsync
 * "succeeds" without the data: the fsyncgate problem), torn or reordered writes, reads
 * returning errors, or data silently lost on power loss. Those are what the product's rule
 * "never go on after a failed sync" is for; this shim checks the rule is kept: it logs a
 * RETRY line when a sync of a file (any of the sync calls, sync_file_range included) is
 * attempted again after it injected a failure into one of them for that file.
 *
 * Environment:
 *   DISKFAULT_PREFIX   a directory: only files at or under it are affected (path of the fd,
 *                      /proc/self/fd/N; for msync the path of the mapping, recorded by the
 *                      interposed mmap/mmap64 and forgotten by munmap).
 *   DISKFAULT_CONTROL  a file whose content selects the fault, re-read when its inode or
 *                      modification time changes (checked at most every 10 ms), so a test can
 *                      change the fault while the process runs (write a temp file, rename it
 *                      over). Tokens, separated by blanks or newlines:
 *     ok                  no fault (also: a missing or empty file)
 *     eio-sync            fsync, fdatasync, msync and sync_file_range fail with EIO (a disk
 *                         that fails syncs fails the writeback they wait for, too)
 *     eio-sync-once       the next fsync, fdatasync or msync fails with EIO, later ones
 *                         succeed (sync_file_range is not counted: "once" aims at the next
 *                         real sync, not at a snapshot's writeback running meanwhile)
 *     eio-writeback       sync_file_range fails with EIO (a snapshot's incremental writeback,
 *                         zab-store's snapshot/writeback.rs); fsync and the others work
 *     eio-write           write, writev, pwrite, pwrite64 fail with EIO
 *     eio-write-once      the next one such write fails with EIO
 *     delay-sync-ms=N     every fsync, fdatasync and msync first sleeps N milliseconds
 *                         (sync_file_range is not delayed)
 *     match=TEXT          only paths that also contain TEXT (e.g. match=/log. or match=Epoch)
 * Without both variables every call goes straight to libc.
 *
 * Every injected error is logged on stderr as one line starting with "diskfault: injected";
 * the first delayed sync after a change of the control file as "diskfault: delaying".
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define PATH_MAX_LEN 512
#define MAX_MAPS 512
#define CHECK_EVERY_NS 10000000L /* SHIM_CHECK_EVERY in tests/src/proc/disk_fault.rs */

enum op { OP_SYNC, OP_WRITE };

static ssize_t (*real_write)(int, const void *, size_t);
static ssize_t (*real_writev)(int, const struct iovec *, int);
static ssize_t (*real_pwrite)(int, const void *, size_t, off_t);
static ssize_t (*real_pwrite64)(int, const void *, size_t, off64_t);
static int (*real_fsync)(int);
static int (*real_fdatasync)(int);
static int (*real_msync)(void *, size_t, int);
static int (*real_sync_file_range)(int, off64_t, off64_t, unsigned int);
static void *(*real_mmap)(void *, size_t, int, int, int, off_t);
static void *(*real_mmap64)(void *, size_t, int, int, int, off64_t);
static int (*real_munmap)(void *, size_t);

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

/* Configuration (under mu). */
static int enabled = -1; /* -1: environment not read yet */
static char prefix[PATH_MAX_LEN];
static char control[PATH_MAX_LEN];
static struct timespec last_check;
static dev_t ctl_dev;
static ino_t ctl_ino;
static struct timespec ctl_mtime;
static int eio_sync, eio_write, eio_writeback, once_sync, once_write, delay_told;
static long delay_ms;
static char match_text[128];
/* The last file an injected sync error was about (RETRY detection). */
static char failed_sync_path[PATH_MAX_LEN];

struct map {
    char *addr;
    size_t len;
    char path[PATH_MAX_LEN];
};
static struct map maps[MAX_MAPS];

#define RESOLVE(name) \
    do { \
        if (!real_##name) \
            *(void **)(&real_##name) = dlsym(RTLD_NEXT, #name); \
    } while (0)

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...) {
    char line[PATH_MAX_LEN + 256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n >= sizeof line)
        n = sizeof line - 1;
    RESOLVE(write);
    if (real_write)
        (void)real_write(2, line, (size_t)n);
}

static void read_env(void) {
    const char *p = getenv("DISKFAULT_PREFIX");
    const char *c = getenv("DISKFAULT_CONTROL");
    enabled = 0;
    if (!p || !c || !*p || !*c || strlen(p) >= PATH_MAX_LEN || strlen(c) >= PATH_MAX_LEN)
        return;
    strcpy(prefix, p);
    size_t n = strlen(prefix);
    while (n > 1 && prefix[n - 1] == '/')
        prefix[--n] = '\0';
    strcpy(control, c);
    enabled = 1;
}

static void parse_control(const char *text) {
    eio_sync = eio_write = eio_writeback = once_sync = once_write = delay_told = 0;
    delay_ms = 0;
    match_text[0] = '\0';
    char buf[512];
    snprintf(buf, sizeof buf, "%s", text);
    char *save = NULL;
    for (char *t = strtok_r(buf, " \t\r\n", &save); t; t = strtok_r(NULL, " \t\r\n", &save)) {
        if (strcmp(t, "eio-sync") == 0)
            eio_sync = 1;
        else if (strcmp(t, "eio-sync-once") == 0)
            once_sync = 1;
        else if (strcmp(t, "eio-writeback") == 0)
            eio_writeback = 1;
        else if (strcmp(t, "eio-write") == 0)
            eio_write = 1;
        else if (strcmp(t, "eio-write-once") == 0)
            once_write = 1;
        else if (strncmp(t, "delay-sync-ms=", 14) == 0)
            delay_ms = strtol(t + 14, NULL, 10);
        else if (strncmp(t, "match=", 6) == 0)
            snprintf(match_text, sizeof match_text, "%s", t + 6);
        else if (strcmp(t, "ok") != 0)
            say("diskfault: unknown control token '%s' ignored\n", t);
    }
}

/* Re-reads the control file if it changed (at most every CHECK_EVERY_NS). Under mu. */
static void refresh(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    long since = (now.tv_sec - last_check.tv_sec) * 1000000000L + (now.tv_nsec - last_check.tv_nsec);
    if (last_check.tv_sec != 0 && since < CHECK_EVERY_NS)
        return;
    last_check = now;
    struct stat st;
    if (stat(control, &st) != 0) {
        if (ctl_ino != 0)
            parse_control("ok");
        ctl_ino = 0;
        return;
    }
    if (st.st_dev == ctl_dev && st.st_ino == ctl_ino && st.st_mtim.tv_sec == ctl_mtime.tv_sec &&
        st.st_mtim.tv_nsec == ctl_mtime.tv_nsec)
        return;
    ctl_dev = st.st_dev;
    ctl_ino = st.st_ino;
    ctl_mtime = st.st_mtim;
    char text[512] = {0};
    int fd = open(control, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t n = read(fd, text, sizeof text - 1);
        if (n > 0)
            text[n] = '\0';
        close(fd);
    }
    parse_control(text);
}

/* Whether any fault of kind `op` is configured now (takes mu). */
static int armed(enum op op) {
    pthread_mutex_lock(&mu);
    if (enabled < 0)
        read_env();
    int on = 0;
    if (enabled) {
        refresh();
        on = op == OP_SYNC ? (eio_sync || once_sync || eio_writeback || delay_ms > 0 ||
                              failed_sync_path[0])
                           : (eio_write || once_write);
    }
    pthread_mutex_unlock(&mu);
    return on;
}

static int under_prefix(const char *path) {
    size_t n = strlen(prefix);
    if (strncmp(path, prefix, n) != 0 || (path[n] != '\0' && path[n] != '/'))
        return 0;
    return match_text[0] == '\0' || strstr(path, match_text) != NULL;
}

static int path_of_fd(int fd, char *out) {
    char link[64];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, out, PATH_MAX_LEN - 1);
    if (n <= 0)
        return 0;
    out[n] = '\0';
    return 1;
}

static int path_of_addr(const void *addr, char *out) {
    const char *a = addr;
    int found = 0;
    pthread_mutex_lock(&mu);
    for (int i = 0; i < MAX_MAPS; i++) {
        if (maps[i].addr && a >= maps[i].addr && a < maps[i].addr + maps[i].len) {
            strcpy(out, maps[i].path);
            found = 1;
            break;
        }
    }
    pthread_mutex_unlock(&mu);
    return found;
}

/* The fault for one sync of `path` by `call` (`writeback`: sync_file_range): 0 to go on, or
 * EIO. Sleeps for a delay. */
static int sync_fault(const char *path, const char *call, int writeback) {
    long sleep_ms = 0;
    int fail = 0;
    pthread_mutex_lock(&mu);
    int match = under_prefix(path);
    if (match && failed_sync_path[0] && strcmp(failed_sync_path, path) == 0)
        say("diskfault: RETRY: %s of %s again after an injected failure of it\n", call, path);
    if (match) {
        if (writeback ? (eio_sync || eio_writeback) : (eio_sync || once_sync)) {
            fail = EIO;
            if (!writeback)
                once_sync = 0;
            snprintf(failed_sync_path, sizeof failed_sync_path, "%s", path);
        } else if (delay_ms > 0 && !writeback) {
            sleep_ms = delay_ms;
            if (!delay_told)
                say("diskfault: delaying every sync under %s by %ld ms (first: %s of %s)\n",
                    prefix, delay_ms, call, path);
            delay_told = 1;
        }
    }
    pthread_mutex_unlock(&mu);
    if (fail)
        say("diskfault: injected EIO into %s of %s\n", call, path);
    if (sleep_ms > 0) {
        struct timespec ts = {sleep_ms / 1000, (sleep_ms % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
        }
    }
    return fail;
}

static int write_fault(int fd, const char *call) {
    if (!armed(OP_WRITE))
        return 0;
    char path[PATH_MAX_LEN];
    if (!path_of_fd(fd, path))
        return 0;
    int fail = 0;
    pthread_mutex_lock(&mu);
    if (under_prefix(path) && (eio_write || once_write)) {
        fail = EIO;
        once_write = 0;
    }
    pthread_mutex_unlock(&mu);
    if (fail)
        say("diskfault: injected EIO into %s of %s\n", call, path);
    return fail;
}

static int fd_sync_fault(int fd, const char *call, int writeback) {
    if (!armed(OP_SYNC))
        return 0;
    char path[PATH_MAX_LEN];
    if (!path_of_fd(fd, path))
        return 0;
    return sync_fault(path, call, writeback);
}

int fsync(int fd) {
    RESOLVE(fsync);
    int e = fd_sync_fault(fd, "fsync", 0);
    if (e) {
        errno = e;
        return -1;
    }
    return real_fsync(fd);
}

int fdatasync(int fd) {
    RESOLVE(fdatasync);
    int e = fd_sync_fault(fd, "fdatasync", 0);
    if (e) {
        errno = e;
        return -1;
    }
    return real_fdatasync(fd);
}

int msync(void *addr, size_t len, int flags) {
    RESOLVE(msync);
    if (armed(OP_SYNC)) {
        char path[PATH_MAX_LEN];
        if (path_of_addr(addr, path)) {
            int e = sync_fault(path, "msync", 0);
            if (e) {
                errno = e;
                return -1;
            }
        }
    }
    return real_msync(addr, len, flags);
}

int sync_file_range(int fd, off64_t off, off64_t n, unsigned int flags) {
    RESOLVE(sync_file_range);
    int e = fd_sync_fault(fd, "sync_file_range", 1);
    if (e) {
        errno = e;
        return -1;
    }
    return real_sync_file_range(fd, off, n, flags);
}

ssize_t write(int fd, const void *buf, size_t n) {
    RESOLVE(write);
    int e = write_fault(fd, "write");
    if (e) {
        errno = e;
        return -1;
    }
    return real_write(fd, buf, n);
}

ssize_t writev(int fd, const struct iovec *iov, int cnt) {
    RESOLVE(writev);
    int e = write_fault(fd, "writev");
    if (e) {
        errno = e;
        return -1;
    }
    return real_writev(fd, iov, cnt);
}

ssize_t pwrite(int fd, const void *buf, size_t n, off_t off) {
    RESOLVE(pwrite);
    int e = write_fault(fd, "pwrite");
    if (e) {
        errno = e;
        return -1;
    }
    return real_pwrite(fd, buf, n, off);
}

ssize_t pwrite64(int fd, const void *buf, size_t n, off64_t off) {
    RESOLVE(pwrite64);
    int e = write_fault(fd, "pwrite64");
    if (e) {
        errno = e;
        return -1;
    }
    return real_pwrite64(fd, buf, n, off);
}

/* Records the file of a shared mapping (for msync), replacing any overlapping record. */
static void remember_map(void *addr, size_t len, int fd) {
    if (addr == MAP_FAILED || fd < 0)
        return;
    pthread_mutex_lock(&mu);
    if (enabled < 0)
        read_env();
    int on = enabled;
    pthread_mutex_unlock(&mu);
    if (!on)
        return;
    char path[PATH_MAX_LEN];
    if (!path_of_fd(fd, path))
        return;
    char *a = addr;
    pthread_mutex_lock(&mu);
    int slot = -1;
    for (int i = 0; i < MAX_MAPS; i++) {
        if (maps[i].addr && a < maps[i].addr + maps[i].len && maps[i].addr < a + len)
            maps[i].addr = NULL;
        if (!maps[i].addr && slot < 0)
            slot = i;
    }
    if (slot >= 0) {
        maps[slot].addr = a;
        maps[slot].len = len;
        strcpy(maps[slot].path, path);
    } else {
        say("diskfault: more than %d file mappings; %s is not tracked\n", MAX_MAPS, path);
    }
    pthread_mutex_unlock(&mu);
}

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
    RESOLVE(mmap);
    void *r = real_mmap(addr, len, prot, flags, fd, off);
    remember_map(r, len, fd);
    return r;
}

void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off64_t off) {
    RESOLVE(mmap64);
    void *r = real_mmap64(addr, len, prot, flags, fd, off);
    remember_map(r, len, fd);
    return r;
}

int munmap(void *addr, size_t len) {
    RESOLVE(munmap);
    char *a = addr;
    pthread_mutex_lock(&mu);
    for (int i = 0; i < MAX_MAPS; i++) {
        if (maps[i].addr && a <= maps[i].addr && maps[i].addr < a + len)
            maps[i].addr = NULL;
    }
    pthread_mutex_unlock(&mu);
    return real_munmap(addr, len);
}
