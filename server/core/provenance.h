/* Where a run's numbers come from, recorded with the run (store_run_set_provenance) each time it
 * starts training, and so in its run object, its bundle and its experiment's bundle:
 *   {"attnlab_version", "commit" (the source tree's commit at build time, "unknown" outside git),
 *    "machine": {"cpu" (/proc/cpuinfo's model name), "cores" (online), "os" (uname)},
 *    "kernel_path", "precision" (what the run's products compute on: engine/kernel_path.h),
 *    "corpus": {"name", "sha256" (of its token file), "bytes"}, "recorded_at"}
 * Enough to say "re-run this" and to tell two machines' results apart. */
#ifndef ATTNLAB_CORE_PROVENANCE_H
#define ATTNLAB_CORE_PROVENANCE_H

#include <jansson.h>

/* The commit the binary was built from (short hash, "-dirty" when the tree had changes), or
 * "unknown"; generated at build time. */
extern const char attnlab_commit[];

/* The SHA-256 (hex) of a corpus token file, from the cache while the file is unchanged; 0, or -1
 * when it cannot be read. *bytes gets its size. */
int provenance_corpus_sha256(const char *tokens_path, char hex[65], long long *bytes);

/* The provenance object of a run starting now on corpus `corpus_name` whose token file is
 * `tokens_path` (NULL or unreadable: no sha256), computing on kernel_path in precision. The
 * corpus's hash is computed once per file (and again when its size or time changes). A new
 * reference, or NULL when out of memory. Thread-safe. */
json_t *provenance_new(const char *corpus_name, const char *tokens_path, const char *kernel_path,
                       const char *precision);

#endif
