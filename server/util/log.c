#include "util/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static volatile int min_level = LOG_INFO;
static const char *const level_names[] = {"debug", "info", "warn", "error"};

int log_level_parse(const char *name) {
    for (int i = 0; i < 4; i++)
        if (!strcmp(name, level_names[i])) return i;
    return -1;
}

void log_set_level(log_level level) { min_level = level; }

void log_msg(log_level level, const char *fmt, ...) {
    if ((int)level < min_level) return;
    char line[2048], stamp[32];
    struct timespec now;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &now);
    gmtime_r(&now.tv_sec, &tm);
    strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &tm);
    int n = snprintf(line, sizeof line, "%s.%03ldZ %-5s ", stamp, now.tv_nsec / 1000000L, level_names[level]);
    va_list ap;
    va_start(ap, fmt);
    if (n > 0 && (size_t)n < sizeof line) vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    va_end(ap);
    /* One fputs per line keeps lines from different threads whole. */
    size_t len = strlen(line);
    if (len + 1 < sizeof line) {
        line[len] = '\n';
        line[len + 1] = 0;
    }
    fputs(line, stderr);
}
