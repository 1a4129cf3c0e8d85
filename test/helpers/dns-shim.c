/*
 * An LD_PRELOAD shim for the resolution tests: the system resolver (getaddrinfo, which
 * dns.lookup runs on libuv's thread pool) never answers for some names and answers at once for
 * others, without any DNS. Compiled by test/helpers/syscall-shim.ts.
 *
 *   a name ending in .hang.test   the call sleeps DNS_SHIM_HANG_S seconds (default 30), then
 *                                 fails with EAI_AGAIN, as a resolver whose servers never answer
 *   a name ending in .ok.test     127.0.0.1
 *   any other name                the real getaddrinfo
 *   DNS_SHIM_LOG                  a file that gets a line "<name>" as each call begins
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int (*getaddrinfo_fn)(const char *, const char *, const struct addrinfo *,
                              struct addrinfo **);

static int ends_with(const char *name, const char *suffix) {
  size_t n = strlen(name), s = strlen(suffix);
  return n >= s && strcmp(name + n - s, suffix) == 0;
}

static void log_call(const char *name) {
  const char *log = getenv("DNS_SHIM_LOG");
  if (log == NULL || *log == '\0') return;
  int fd = open(log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return;
  char line[512];
  int length = snprintf(line, sizeof line, "%s\n", name);
  if (length > 0 && (size_t)length < sizeof line) write(fd, line, (size_t)length);
  close(fd);
}

int getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
                struct addrinfo **res) {
  getaddrinfo_fn real = (getaddrinfo_fn)dlsym(RTLD_NEXT, "getaddrinfo");
  if (node == NULL) return real(node, service, hints, res);
  log_call(node);
  if (ends_with(node, ".hang.test")) {
    const char *seconds = getenv("DNS_SHIM_HANG_S");
    sleep(seconds == NULL ? 30 : (unsigned)atoi(seconds));
    return EAI_AGAIN;
  }
  if (ends_with(node, ".ok.test")) {
    struct addrinfo numeric = {0};
    if (hints != NULL) numeric = *hints;
    numeric.ai_flags |= AI_NUMERICHOST;
    return real("127.0.0.1", service, &numeric, res);
  }
  return real(node, service, hints, res);
}
