/* Structured log lines on stderr: "time level message key=value ...". Safe from any thread. */
#ifndef ATTNLAB_LOG_H
#define ATTNLAB_LOG_H

typedef enum { LOG_DEBUG = 0, LOG_INFO, LOG_WARN, LOG_ERROR } log_level;

/* Parses "debug|info|warn|error"; returns -1 on anything else. */
int log_level_parse(const char *name);
void log_set_level(log_level level);
void log_msg(log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)
#define log_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_WARN, __VA_ARGS__)
#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)

#endif
