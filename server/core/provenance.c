/* A run's provenance (provenance.h). */
#include "core/provenance.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "util/hash.h"

/* The CPU's model name as /proc/cpuinfo gives it ("unknown" where there is none). */
static void cpu_model(char *buf, size_t len) {
    snprintf(buf, len, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10)) continue;
        const char *v = strchr(line, ':');
        if (!v) break;
        for (v++; *v == ' ' || *v == '\t'; v++) {}
        snprintf(buf, len, "%s", v);
        buf[strcspn(buf, "\n")] = '\0';
        break;
    }
    fclose(f);
}

/* One remembered corpus hash: the file, its size and time when hashed, the digest. */
static struct {
    pthread_mutex_t lock;
    char path[4096];
    off_t size;
    struct timespec mtime;
    char hex[65];
} cache = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* The file's SHA-256 (hex), from the cache while the file is unchanged; 0, or -1 when unreadable. */
int provenance_corpus_sha256(const char *path, char hex[65], long long *bytes) {
    struct stat s;
    if (!path || stat(path, &s) != 0) return -1;
    *bytes = (long long)s.st_size;
    pthread_mutex_lock(&cache.lock);
    int hit = !strcmp(cache.path, path) && cache.size == s.st_size && cache.mtime.tv_sec == s.st_mtim.tv_sec &&
              cache.mtime.tv_nsec == s.st_mtim.tv_nsec;
    if (hit) memcpy(hex, cache.hex, 65);
    pthread_mutex_unlock(&cache.lock);
    if (hit) return 0;
    if (hash_file_sha256(path, hex, NULL) != 0) return -1;
    pthread_mutex_lock(&cache.lock);
    snprintf(cache.path, sizeof cache.path, "%s", path);
    cache.size = s.st_size;
    cache.mtime = s.st_mtim;
    memcpy(cache.hex, hex, 65);
    pthread_mutex_unlock(&cache.lock);
    return 0;
}

json_t *provenance_new(const char *corpus_name, const char *tokens_path, const char *kernel_path,
                       const char *precision) {
    char cpu[256], os[200] = "unknown", hex[65];
    cpu_model(cpu, sizeof cpu);
    struct utsname u;
    if (uname(&u) == 0) snprintf(os, sizeof os, "%s %s %s", u.sysname, u.release, u.machine);
    json_t *corpus = json_pack("{s:s}", "name", corpus_name ? corpus_name : "");
    long long bytes = 0;
    if (corpus && provenance_corpus_sha256(tokens_path, hex, &bytes) == 0 &&
        (json_object_set_new(corpus, "sha256", json_string(hex)) < 0 ||
         json_object_set_new(corpus, "bytes", json_integer(bytes)) < 0)) {
        json_decref(corpus);
        return NULL;
    }
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    return json_pack("{s:s, s:s, s:{s:s, s:I, s:s}, s:s, s:s, s:o*, s:f}", "attnlab_version", ATTNLAB_VERSION, "commit",
                     attnlab_commit, "machine", "cpu", cpu, "cores", (json_int_t)sysconf(_SC_NPROCESSORS_ONLN), "os",
                     os, "kernel_path", kernel_path ? kernel_path : "unknown", "precision",
                     precision ? precision : "unknown", "corpus", corpus, "recorded_at",
                     (double)now.tv_sec + now.tv_nsec / 1e9);
}
