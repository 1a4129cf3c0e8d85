/*
 * An LD_PRELOAD shim for the storage tests: it makes fsync and fdatasync fail on demand and
 * records the file system calls that make a write durable, and the writes before them (a log's
 * fdatasync covers a record only when it began after the record's write). Compiled by
 * test/helpers/syscall-shim.ts.
 *
 * Environment:
 *   SHIM_FAIL_MARKER  while this file exists, fsync and fdatasync fail (without syncing)
 *   SHIM_FAIL_KIND    which descriptors fail: file, dir or both (default both)
 *   SHIM_FAIL_ERRNO   the errno number to fail with (default EIO)
 *   SHIM_FAIL_UNDER   fail only descriptors whose path starts with this (default: all)
 *   SHIM_FAIL_ONCE    when set, the first failure removes the marker (calls that began meanwhile
 *                     may still fail): a store's own later syncs, such as a void, then work
 *   SHIM_FAIL_RENAME_MARKER  while this file exists, renames onto a path under SHIM_FAIL_UNDER
 *                     fail with SHIM_FAIL_ERRNO (without renaming)
 *   SHIM_FAIL_OPEN_MARKER  while this file exists, opens for writing of a path under
 *                     SHIM_FAIL_UNDER fail with SHIM_FAIL_ERRNO (without opening)
 *   SHIM_DIR_SYNC_DELAY_MS  how long a directory fsync takes at least (a slow disk: writers
 *                     arrive while one runs), added after the real call
 *   SHIM_DATASYNC_DELAY_MS  how long an fdatasync takes at least (the change feed's log uses
 *                     fdatasync, user files fsync: the feed's sync can be made the slow one)
 *   SHIM_SYNC_DELAY_MS  how long every fsync and fdatasync takes at least (a disk whose syncs
 *                     are slow: the benchmark's slow-disk row)
 *   SHIM_LOG          a file that gets one line per recorded call
 *   SHIM_LOG_UNDER    record only calls that name a path starting with this (default: all)
 *
 * A log line is tab-separated: pid, call, result, errno, then the paths (fd resolved through
 * /proc/self/fd), then for opens the flags in hex, for fsyncs "dir N" or "file N", and for writes
 * (write, pwrite, writev, pwritev; the result is the bytes written) the offset asked for (-1 for
 * the file position) and, after a space, the first 64 bytes written, escaped (\xHH for a byte
 * outside printable ASCII and for the backslash). Each line goes out in one write(2) on a file
 * opened with O_APPEND, so lines of concurrent threads never mix. A line is written after the
 * real call returned and before the caller sees its result, so the log's order is the program's
 * order for calls that depend on each other. An fsync also writes a "<call>-begin" line, with the
 * same N, just before it starts: an fsync whose begin line follows a rename's line started after
 * that rename, so it covers it.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#define LINE_MAX_BYTES 8192

static void *next_symbol(const char *name) {
  return dlsym(RTLD_NEXT, name);
}

/* The raw system calls below never come back through this shim. */
static void append_line(const char *line, size_t length) {
  const char *log = getenv("SHIM_LOG");
  if (log == NULL || *log == '\0') return;
  long fd = syscall(SYS_openat, AT_FDCWD, log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return;
  syscall(SYS_write, (int)fd, line, length);
  syscall(SYS_close, (int)fd);
}

static void fd_path(int fd, char *out, size_t size) {
  char link[64];
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  ssize_t n = readlink(link, out, size - 1);
  if (n < 0) n = 0;
  out[n] = '\0';
}

/* An absolute path for (dirfd, path), as the kernel would resolve its start. */
static void at_path(int dirfd, const char *path, char *out, size_t size) {
  if (path == NULL) {
    snprintf(out, size, "?");
    return;
  }
  if (path[0] == '/') {
    snprintf(out, size, "%s", path);
    return;
  }
  char base[PATH_MAX];
  if (dirfd == AT_FDCWD) {
    if (getcwd(base, sizeof base) == NULL) base[0] = '\0';
  } else {
    fd_path(dirfd, base, sizeof base);
  }
  snprintf(out, size, "%s/%s", base, path);
}

static int wanted(const char *a, const char *b) {
  const char *under = getenv("SHIM_LOG_UNDER");
  if (under == NULL || *under == '\0') return 1;
  size_t n = strlen(under);
  return (a != NULL && strncmp(a, under, n) == 0) || (b != NULL && strncmp(b, under, n) == 0);
}

static void record(const char *call, long result, int error, const char *a, const char *b, const char *extra) {
  if (getenv("SHIM_LOG") == NULL || !wanted(a, b)) return;
  char line[LINE_MAX_BYTES];
  int n = snprintf(line, sizeof line, "%d\t%s\t%ld\t%d\t%s\t%s\t%s\n", (int)getpid(), call, result,
                   result < 0 ? error : 0, a == NULL ? "" : a, b == NULL ? "" : b, extra == NULL ? "" : extra);
  if (n <= 0) return;
  if ((size_t)n >= sizeof line) n = sizeof line - 1;
  append_line(line, (size_t)n);
}

static int is_directory(int fd) {
  struct stat info;
  return fstat(fd, &info) == 0 && S_ISDIR(info.st_mode);
}

/* Whether this fsync must fail now: the marker exists and the descriptor is of the chosen kind and place. */
static int must_fail(int directory, const char *path) {
  const char *marker = getenv("SHIM_FAIL_MARKER");
  if (marker == NULL || *marker == '\0' || access(marker, F_OK) != 0) return 0;
  const char *under = getenv("SHIM_FAIL_UNDER");
  if (under != NULL && *under != '\0' && strncmp(path, under, strlen(under)) != 0) return 0;
  const char *kind = getenv("SHIM_FAIL_KIND");
  if (kind == NULL || strcmp(kind, "both") == 0) return 1;
  return strcmp(kind, directory ? "dir" : "file") == 0;
}

static int fail_errno(void) {
  const char *text = getenv("SHIM_FAIL_ERRNO");
  int value = text == NULL ? 0 : atoi(text);
  return value > 0 ? value : EIO;
}

static unsigned long sync_counter;

static int sync_call(const char *call, const char *begin, int fd, int (*real)(int)) {
  int directory = is_directory(fd);
  unsigned long id = __atomic_add_fetch(&sync_counter, 1, __ATOMIC_SEQ_CST);
  char path[PATH_MAX];
  char extra[48];
  fd_path(fd, path, sizeof path);
  snprintf(extra, sizeof extra, "%s %lu", directory ? "dir" : "file", id);
  record(begin, 0, 0, path, NULL, extra);
  int result;
  int error;
  if (must_fail(directory, path)) {
    result = -1;
    error = fail_errno();
    const char *once = getenv("SHIM_FAIL_ONCE");
    if (once != NULL && *once != '\0') syscall(SYS_unlinkat, AT_FDCWD, getenv("SHIM_FAIL_MARKER"), 0);
  } else {
    result = real(fd);
    error = errno;
    const char *delay = getenv("SHIM_DIR_SYNC_DELAY_MS");
    if (directory && delay != NULL && atoi(delay) > 0) usleep((useconds_t)atoi(delay) * 1000);
    const char *any_delay = getenv("SHIM_SYNC_DELAY_MS");
    if (any_delay != NULL && atoi(any_delay) > 0) usleep((useconds_t)atoi(any_delay) * 1000);
    const char *data_delay = getenv("SHIM_DATASYNC_DELAY_MS");
    if (strcmp(call, "fdatasync") == 0 && data_delay != NULL && atoi(data_delay) > 0) {
      usleep((useconds_t)atoi(data_delay) * 1000);
    }
  }
  record(call, result, error, path, NULL, extra);
  errno = error;
  return result;
}

int fsync(int fd) {
  static int (*real)(int);
  if (real == NULL) real = (int (*)(int))next_symbol("fsync");
  return sync_call("fsync", "fsync-begin", fd, real);
}

int fdatasync(int fd) {
  static int (*real)(int);
  if (real == NULL) real = (int (*)(int))next_symbol("fdatasync");
  return sync_call("fdatasync", "fdatasync-begin", fd, real);
}

static void record_open(const char *call, int dirfd, const char *path, int flags, int result, int error) {
  char full[PATH_MAX];
  at_path(dirfd, path, full, sizeof full);
  char extra[32];
  snprintf(extra, sizeof extra, "0x%x", (unsigned)flags);
  record(call, result, error, full, NULL, extra);
}

static mode_t mode_of(int flags, va_list args) {
  return (flags & O_CREAT) != 0 || (flags & O_TMPFILE) == O_TMPFILE ? (mode_t)va_arg(args, int) : 0;
}

/* Whether an open of `path` for writing must fail now (SHIM_FAIL_OPEN_MARKER). */
static int open_must_fail(int dirfd, const char *path, int flags) {
  if ((flags & O_ACCMODE) == O_RDONLY) return 0;
  const char *marker = getenv("SHIM_FAIL_OPEN_MARKER");
  if (marker == NULL || *marker == '\0' || access(marker, F_OK) != 0) return 0;
  const char *under = getenv("SHIM_FAIL_UNDER");
  if (under == NULL || *under == '\0') return 1;
  char full[PATH_MAX];
  at_path(dirfd, path, full, sizeof full);
  return strncmp(full, under, strlen(under)) == 0;
}

#define OPEN_WRAPPER(NAME)                                                             \
  int NAME(const char *path, int flags, ...) {                                         \
    static int (*real)(const char *, int, ...);                                        \
    if (real == NULL) real = (int (*)(const char *, int, ...))next_symbol(#NAME);      \
    va_list args;                                                                      \
    va_start(args, flags);                                                             \
    mode_t mode = mode_of(flags, args);                                                \
    va_end(args);                                                                      \
    int failing = open_must_fail(AT_FDCWD, path, flags);                               \
    int result = failing ? -1 : real(path, flags, mode);                               \
    int error = failing ? fail_errno() : errno;                                        \
    record_open(#NAME, AT_FDCWD, path, flags, result, error);                          \
    errno = error;                                                                     \
    return result;                                                                     \
  }

#define OPENAT_WRAPPER(NAME)                                                           \
  int NAME(int dirfd, const char *path, int flags, ...) {                              \
    static int (*real)(int, const char *, int, ...);                                   \
    if (real == NULL) real = (int (*)(int, const char *, int, ...))next_symbol(#NAME); \
    va_list args;                                                                      \
    va_start(args, flags);                                                             \
    mode_t mode = mode_of(flags, args);                                                \
    va_end(args);                                                                      \
    int failing = open_must_fail(dirfd, path, flags);                                  \
    int result = failing ? -1 : real(dirfd, path, flags, mode);                        \
    int error = failing ? fail_errno() : errno;                                        \
    record_open(#NAME, dirfd, path, flags, result, error);                             \
    errno = error;                                                                     \
    return result;                                                                     \
  }

OPEN_WRAPPER(open)
OPEN_WRAPPER(open64)
OPENAT_WRAPPER(openat)
OPENAT_WRAPPER(openat64)

/* The fortified forms a caller built with _FORTIFY_SOURCE may reach (no mode argument). */
int __open_2(const char *path, int flags) { return open(path, flags); }
int __open64_2(const char *path, int flags) { return open64(path, flags); }
int __openat_2(int dirfd, const char *path, int flags) { return openat(dirfd, path, flags); }
int __openat64_2(int dirfd, const char *path, int flags) { return openat64(dirfd, path, flags); }

static void record_two(const char *call, int fd1, const char *path1, int fd2, const char *path2, int result, int error) {
  char a[PATH_MAX];
  char b[PATH_MAX];
  at_path(fd1, path1, a, sizeof a);
  at_path(fd2, path2, b, sizeof b);
  record(call, result, error, a, b, NULL);
}

/* Whether a rename onto `to` (absolute) must fail now. */
static int rename_must_fail(const char *to) {
  const char *marker = getenv("SHIM_FAIL_RENAME_MARKER");
  if (marker == NULL || *marker == '\0' || access(marker, F_OK) != 0) return 0;
  const char *under = getenv("SHIM_FAIL_UNDER");
  return under == NULL || *under == '\0' || strncmp(to, under, strlen(under)) == 0;
}

int rename(const char *from, const char *to) {
  static int (*real)(const char *, const char *);
  if (real == NULL) real = (int (*)(const char *, const char *))next_symbol("rename");
  char target[PATH_MAX];
  at_path(AT_FDCWD, to, target, sizeof target);
  int failing = rename_must_fail(target);
  int result = failing ? -1 : real(from, to);
  int error = failing ? fail_errno() : errno;
  record_two("rename", AT_FDCWD, from, AT_FDCWD, to, result, error);
  errno = error;
  return result;
}

int renameat(int fromfd, const char *from, int tofd, const char *to) {
  static int (*real)(int, const char *, int, const char *);
  if (real == NULL) real = (int (*)(int, const char *, int, const char *))next_symbol("renameat");
  char target[PATH_MAX];
  at_path(tofd, to, target, sizeof target);
  int failing = rename_must_fail(target);
  int result = failing ? -1 : real(fromfd, from, tofd, to);
  int error = failing ? fail_errno() : errno;
  record_two("renameat", fromfd, from, tofd, to, result, error);
  errno = error;
  return result;
}

int renameat2(int fromfd, const char *from, int tofd, const char *to, unsigned int flags) {
  static int (*real)(int, const char *, int, const char *, unsigned int);
  if (real == NULL) real = (int (*)(int, const char *, int, const char *, unsigned int))next_symbol("renameat2");
  char target[PATH_MAX];
  at_path(tofd, to, target, sizeof target);
  int failing = rename_must_fail(target);
  int result = failing ? -1 : real(fromfd, from, tofd, to, flags);
  int error = failing ? fail_errno() : errno;
  record_two("renameat2", fromfd, from, tofd, to, result, error);
  errno = error;
  return result;
}

int link(const char *from, const char *to) {
  static int (*real)(const char *, const char *);
  if (real == NULL) real = (int (*)(const char *, const char *))next_symbol("link");
  int result = real(from, to);
  int error = errno;
  record_two("link", AT_FDCWD, from, AT_FDCWD, to, result, error);
  errno = error;
  return result;
}

int linkat(int fromfd, const char *from, int tofd, const char *to, int flags) {
  static int (*real)(int, const char *, int, const char *, int);
  if (real == NULL) real = (int (*)(int, const char *, int, const char *, int))next_symbol("linkat");
  int result = real(fromfd, from, tofd, to, flags);
  int error = errno;
  record_two("linkat", fromfd, from, tofd, to, result, error);
  errno = error;
  return result;
}

int unlink(const char *path) {
  static int (*real)(const char *);
  if (real == NULL) real = (int (*)(const char *))next_symbol("unlink");
  int result = real(path);
  int error = errno;
  char full[PATH_MAX];
  at_path(AT_FDCWD, path, full, sizeof full);
  record("unlink", result, error, full, NULL, NULL);
  errno = error;
  return result;
}

int unlinkat(int dirfd, const char *path, int flags) {
  static int (*real)(int, const char *, int);
  if (real == NULL) real = (int (*)(int, const char *, int))next_symbol("unlinkat");
  int result = real(dirfd, path, flags);
  int error = errno;
  char full[PATH_MAX];
  at_path(dirfd, path, full, sizeof full);
  record("unlinkat", result, error, full, NULL, NULL);
  errno = error;
  return result;
}

int mkdir(const char *path, mode_t mode) {
  static int (*real)(const char *, mode_t);
  if (real == NULL) real = (int (*)(const char *, mode_t))next_symbol("mkdir");
  int result = real(path, mode);
  int error = errno;
  char full[PATH_MAX];
  at_path(AT_FDCWD, path, full, sizeof full);
  record("mkdir", result, error, full, NULL, NULL);
  errno = error;
  return result;
}

int mkdirat(int dirfd, const char *path, mode_t mode) {
  static int (*real)(int, const char *, mode_t);
  if (real == NULL) real = (int (*)(int, const char *, mode_t))next_symbol("mkdirat");
  int result = real(dirfd, path, mode);
  int error = errno;
  char full[PATH_MAX];
  at_path(dirfd, path, full, sizeof full);
  record("mkdirat", result, error, full, NULL, NULL);
  errno = error;
  return result;
}

/* The bytes of a write shown in its log line, so that a small file's content can be told apart. */
#define SHOWN_BYTES 64

static void record_write(const char *call, int fd, long long offset, const struct iovec *iov, int iovcnt,
                         ssize_t result, int error) {
  if (getenv("SHIM_LOG") == NULL) return;
  char path[PATH_MAX];
  fd_path(fd, path, sizeof path);
  if (!wanted(path, NULL)) return;
  char extra[32 + SHOWN_BYTES * 4];
  int n = snprintf(extra, sizeof extra, "%lld ", offset);
  size_t left = result > 0 ? (size_t)result : 0;
  if (left > SHOWN_BYTES) left = SHOWN_BYTES;
  for (int i = 0; i < iovcnt && left > 0; i++) {
    const unsigned char *bytes = iov[i].iov_base;
    size_t take = iov[i].iov_len < left ? iov[i].iov_len : left;
    for (size_t at = 0; at < take; at++) {
      unsigned char c = bytes[at];
      if (c >= 0x20 && c < 0x7f && c != '\\') extra[n++] = (char)c;
      else n += snprintf(extra + n, sizeof extra - (size_t)n, "\\x%02x", c);
    }
    left -= take;
  }
  extra[n] = '\0';
  record(call, (long)result, error, path, NULL, extra);
}

ssize_t write(int fd, const void *data, size_t size) {
  static ssize_t (*real)(int, const void *, size_t);
  if (real == NULL) real = (ssize_t (*)(int, const void *, size_t))next_symbol("write");
  ssize_t result = real(fd, data, size);
  int error = errno;
  struct iovec iov = {(void *)data, size};
  record_write("write", fd, -1, &iov, 1, result, error);
  errno = error;
  return result;
}

#define PWRITE_WRAPPER(NAME, OFF_T)                                                     \
  ssize_t NAME(int fd, const void *data, size_t size, OFF_T offset) {                   \
    static ssize_t (*real)(int, const void *, size_t, OFF_T);                           \
    if (real == NULL) real = (ssize_t (*)(int, const void *, size_t, OFF_T))next_symbol(#NAME); \
    ssize_t result = real(fd, data, size, offset);                                      \
    int error = errno;                                                                  \
    struct iovec iov = {(void *)data, size};                                            \
    record_write(#NAME, fd, (long long)offset, &iov, 1, result, error);                 \
    errno = error;                                                                      \
    return result;                                                                      \
  }

PWRITE_WRAPPER(pwrite, off_t)
PWRITE_WRAPPER(pwrite64, off64_t)

ssize_t writev(int fd, const struct iovec *iov, int iovcnt) {
  static ssize_t (*real)(int, const struct iovec *, int);
  if (real == NULL) real = (ssize_t (*)(int, const struct iovec *, int))next_symbol("writev");
  ssize_t result = real(fd, iov, iovcnt);
  int error = errno;
  record_write("writev", fd, -1, iov, iovcnt, result, error);
  errno = error;
  return result;
}

#define PWRITEV_WRAPPER(NAME, OFF_T)                                                    \
  ssize_t NAME(int fd, const struct iovec *iov, int iovcnt, OFF_T offset) {             \
    static ssize_t (*real)(int, const struct iovec *, int, OFF_T);                      \
    if (real == NULL) real = (ssize_t (*)(int, const struct iovec *, int, OFF_T))next_symbol(#NAME); \
    ssize_t result = real(fd, iov, iovcnt, offset);                                     \
    int error = errno;                                                                  \
    record_write(#NAME, fd, (long long)offset, iov, iovcnt, result, error);             \
    errno = error;                                                                      \
    return result;                                                                      \
  }

PWRITEV_WRAPPER(pwritev, off_t)
PWRITEV_WRAPPER(pwritev64, off64_t)

ssize_t pwritev2(int fd, const struct iovec *iov, int iovcnt, off_t offset, int flags) {
  static ssize_t (*real)(int, const struct iovec *, int, off_t, int);
  if (real == NULL) real = (ssize_t (*)(int, const struct iovec *, int, off_t, int))next_symbol("pwritev2");
  ssize_t result = real(fd, iov, iovcnt, offset, flags);
  int error = errno;
  record_write("pwritev2", fd, (long long)offset, iov, iovcnt, result, error);
  errno = error;
  return result;
}
