/* An LD_PRELOAD shim that makes the disk fail under a live process, for
 * the failing-disk tests (failing_disk.rs). Only file descriptors whose
 * path contains FAULT_SHIM_PATH are touched, and only while the file
 * FAULT_SHIM_ARM exists; with FAULT_SHIM_ONCE set, the first fault removes
 * it. FAULT_SHIM_OP is "sync" (fsync, fdatasync fail with EIO) or "write"
 * (write, pwrite, pwrite64 fail with ENOSPC). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

static int armed_for(int fd, const char *op) {
    const char *want_op = getenv("FAULT_SHIM_OP");
    const char *path = getenv("FAULT_SHIM_PATH");
    const char *arm = getenv("FAULT_SHIM_ARM");
    if (!want_op || !path || !arm || strcmp(want_op, op) != 0) return 0;
    if (access(arm, F_OK) != 0) return 0;
    char link[64], target[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, target, sizeof target - 1);
    if (n < 0) return 0;
    target[n] = '\0';
    if (!strstr(target, path)) return 0;
    if (getenv("FAULT_SHIM_ONCE")) unlink(arm);
    return 1;
}

#define REAL(name) ((__typeof__(&name))dlsym(RTLD_NEXT, #name))

int fsync(int fd) {
    if (armed_for(fd, "sync")) { errno = EIO; return -1; }
    return REAL(fsync)(fd);
}

int fdatasync(int fd) {
    if (armed_for(fd, "sync")) { errno = EIO; return -1; }
    return REAL(fdatasync)(fd);
}

ssize_t write(int fd, const void *buf, size_t count) {
    if (armed_for(fd, "write")) { errno = ENOSPC; return -1; }
    return REAL(write)(fd, buf, count);
}

ssize_t pwrite(int fd, const void *buf, size_t count, off_t offset) {
    if (armed_for(fd, "write")) { errno = ENOSPC; return -1; }
    return REAL(pwrite)(fd, buf, count, offset);
}

ssize_t pwrite64(int fd, const void *buf, size_t count, off_t offset) {
    if (armed_for(fd, "write")) { errno = ENOSPC; return -1; }
    return REAL(pwrite64)(fd, buf, count, offset);
}
