/* A run's checkpoint on disk, and whether it may be trusted.
 *
 * The engine writes a new checkpoint to a staging name (checkpoint.pending.safetensors); the run's
 * job then makes sure the metrics before it are stored, records it in the store (run id, step,
 * size, SHA-256 of its bytes) and only then gives it its name (checkpoint.safetensors). So a
 * checkpoint under its name always has its metrics stored and its record written, whatever moment
 * a kill lands. Resuming takes the file only when the database says it is this run's and its bytes
 * still match: a stranger's file (left by a deleted database whose ids now start again) or one
 * changed since it was written is never resumed from. */
#ifndef ATTNLAB_CHECKPOINTS_H
#define ATTNLAB_CHECKPOINTS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "store/store.h"

/* The staging and final paths of run_id's checkpoint under data_dir. */
void checkpoint_paths(const char *data_dir, long long run_id, char *staging, size_t staging_len, char *final,
                      size_t final_len);

/* Seals the checkpoint the engine just wrote at staging (for step): records it, then renames it to
 * final. 0, or -1 with a reason in err (the previous checkpoint then stays in place). */
int checkpoint_seal(store *st, const char *data_dir, long long run_id, long step, const char *staging,
                    const char *final, char *err, size_t errlen);

/* Decides what a run starting to train resumes from: *resume is final (this run's checkpoint,
 * verified) or NULL (train from the start). stored_step is the checkpoint step the run's row
 * holds (0: the run never checkpointed in this database). A file that is not the run's own is
 * removed when the run never checkpointed (a stranger's); when it should have been the run's own
 * but does not match its record, -1 with a reason in err (the run cannot resume). A sealed
 * checkpoint whose rename a kill interrupted is finished here. */
int checkpoint_choose(store *st, const char *data_dir, long long run_id, int stored_step, const char *staging,
                      const char *final, const char **resume, char *err, size_t errlen);

/* Whether the sealed checkpoint at path still has the bytes the run recorded for it (its SHA-256),
 * before it is served: 0 yes (or it has no record: written before records existed); 1 no file;
 * -1 with a reason in err when it was changed or replaced since, or the record cannot be read. */
int checkpoint_check_sealed(store *st, long long run_id, const char *path, char *err, size_t errlen);
/* How many whole-file hashes this process has computed: a checkpoint is hashed when it is sealed,
 * and checked against that afterwards by its identity (device, inode, size, modification time); a
 * file written or replaced since is hashed again. */
unsigned long long checkpoint_hashes_computed(void);

/* Where a run's tokens come from, as extra metadata for its checkpoints and weights
 * (train_config.meta_kv): run_id, corpus, tokenizer ("gpt2", "bytes", "task", or "unknown" when the
 * corpus row cannot be read) and vocab_source (what the ids mean: the GPT-2 BPE files, raw bytes,
 * or a task corpus's synthetic ids). kv points into the struct: keep it alive while it is used. */
typedef struct {
    char run_id[24], corpus[128], tokenizer[16], vocab_source[256];
    const char *kv[8];
    int n; /* pairs in kv */
} checkpoint_provenance;
void checkpoint_provenance_fill(checkpoint_provenance *p, store *st, long long run_id, const char *corpus_name);
/* The same from what a caller knows without the store (attnlabd train): run_id NULL leaves that
 * pair out; tokenizer NULL is "unknown", with unknown_why in vocab_source; task_kind for "task". */
void checkpoint_provenance_set(checkpoint_provenance *p, const char *run_id, const char *corpus, const char *tokenizer,
                               const char *task_kind, const char *unknown_why);

/* The model weights of a checkpoint, without the optimiser state, as a download streams them: a
 * safetensors file with its model tensors (none of the "adamw.*" moments), bytes as they are, and
 * its metadata with "format" = "attnlab-weights", plus the description keys of model_config_metadata
 * (RoPE layout, epsilons, GELU, ...) that a checkpoint written before they existed lacks
 * (attnlab_version excepted: the version that trained it is not known). Read from the checkpoint
 * itself as they are sent: no copy on disk and no more memory than the caller's buffer, however
 * slowly they are read. What the weights file holds (its header, and which byte ranges of the
 * checkpoint follow it) is worked out once per file (by identity: device, inode, size, times) and
 * kept. open: 0 with *out and *size (the download's length); 1 when there is no checkpoint at that
 * path; -1 with a reason in err. read: bytes written into buf (> 0), 0 at the end, -1 when the file
 * cannot be read. */
typedef struct checkpoint_weights checkpoint_weights;
int checkpoint_weights_open(const char *checkpoint, checkpoint_weights **out, uint64_t *size, char *err, size_t errlen);
ssize_t checkpoint_weights_read(checkpoint_weights *w, char *buf, size_t max);
void checkpoint_weights_close(checkpoint_weights *w);

#endif
