/* The service's corpora: the catalogue rows in the store and the token files under
 * <data-dir>/corpora/<name>/tokens.u16.
 *
 * Built in: "small" (corpora/small/text.txt from the source tree, tokenized with GPT-2 at start-up
 * and cached in the data directory) and "default" (the MiniPile stand-in that `make corpus` builds
 * into <data-dir>/corpora/default/; listed only once it exists). Uploads are plain text streamed to
 * <data-dir>/corpora/<name>/upload.txt and tokenized on the probe queue; an upload that was still
 * tokenizing when the process died is marked failed at the next start. */
#ifndef ATTNLAB_CORPORA_H
#define ATTNLAB_CORPORA_H

#include <stddef.h>

#include "engine/corpus.h"
#include "engine/tasks.h"
#include "engine/tokenizer.h"
#include "store/store.h"

typedef struct corpora corpora;

/* source_dir: the source tree's corpora/ folder (NULL: look beside the binary and in ./corpora). */
corpora *corpora_start(store *st, const char *data_dir, const char *source_dir);
void corpora_free(corpora *c);

/* 1 for the names of the built-in corpora ("small", "small-bytes", "default"), which no upload may take. */
int corpora_name_reserved(const char *name);
/* 1 for a name a corpus may have: CORPORA_NAME_RULE (the RunConfig schema's corpus pattern). */
#define CORPORA_NAME_RULE "1-40 characters of a-z, 0-9, _ and -"
int corpora_name_ok(const char *name);
/* The shared tokenizers (NULL when its files are missing; gpt2 then reports why in the log). */
const tokenizer *corpora_tokenizer(corpora *c, const char *encoding);
/* Vocabulary size of a corpus's tokenizer (a task corpus: its config's vocab), or -1 if the corpus
 * is unknown or not ready. */
int corpora_vocab(corpora *c, const char *name);
/* The same from a catalogue row (store_corpus_get's object): a task corpus's config vocab, 256 for
 * bytes, else 50257 (GPT-2); -1 when the row is not ready. */
int corpora_vocab_of(const json_t *row);
/* Loads a ready corpus's tokens. */
engine_status corpora_open(corpora *c, const char *name, corpus **out, engine_error *err);
/* The folder of a corpus (for uploads): <data-dir>/corpora/<name>. */
void corpora_dir(corpora *c, const char *name, char *buf, size_t len);
/* Tokenizes <dir>/upload.txt into tokens.u16 and marks the corpus ready (or failed). Runs on a
 * probe worker. */
void corpora_tokenize_upload(corpora *c, const char *name, const char *encoding);
/* Removes a corpus's folder after its row was deleted. */
void corpora_remove_files(corpora *c, const char *name);

/* ---- task corpora (engine/tasks.h): generated from a config, not uploaded ------------------
 * The row records the config as JSON ({"kind","vocab","seq_len","windows","seed","params":{…}}
 * plus "offsets":[…] for copy_offset) with tokenizer "task"; the files are tokens.u16 and the
 * answer labels labels.u8. Generation is deterministic and takes milliseconds, so the labels are
 * regenerated from the config whenever they are needed. */

/* The most tokens (windows x seq_len) a task corpus may hold: 32 MiB of uint16. */
#define CORPORA_TASK_MAX_TOKENS (16 * 1024 * 1024)
/* Reads a request or stored config (an object with "kind" and optional "vocab", "seq_len",
 * "windows", "seed", "params", "offsets") into a validated tasks_config, at most
 * CORPORA_TASK_MAX_TOKENS tokens. 0, or -1 with the
 * offending member in field ("kind", "params.len_min", …; "" for a rule that spans fields) and a
 * message. */
int corpora_task_config_parse(const json_t *spec, tasks_config *out, char *field, size_t field_len, char *msg,
                              size_t msg_len);

typedef enum {
    CORPORA_TASK_CREATED,
    CORPORA_TASK_EXISTS,
    CORPORA_TASK_CONFLICT,
    CORPORA_TASK_FAILED
} corpora_task_result;
/* Generates and records task corpus `name` (a valid, unreserved name): CREATED; EXISTS when a
 * ready corpus of that name with the same config is there already (nothing done); CONFLICT when
 * the name holds something else; FAILED (message in msg) when it cannot be written or stored. */
corpora_task_result corpora_create_task(corpora *c, const char *name, const tasks_config *cfg, char *msg,
                                        size_t msg_len);
/* The task corpus behind a corpus, regenerated from its recorded config: *out NULL (and ENGINE_OK)
 * when the corpus is not a task corpus. ENGINE_ERR_INVALID (unknown corpus, bad config),
 * ENGINE_ERR_NOMEM. */
engine_status corpora_open_tasks(corpora *c, const char *name, tasks_corpus **out, engine_error *err);
/* 1 when `name` is a ready task corpus (it has answer positions), else 0. */
int corpora_is_task(corpora *c, const char *name);

#endif
