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
#include "engine/tokenizer.h"
#include "store.h"

typedef struct corpora corpora;

/* source_dir: the source tree's corpora/ folder (NULL: look beside the binary and in ./corpora). */
corpora *corpora_start(store *st, const char *data_dir, const char *source_dir);
void corpora_free(corpora *c);

/* 1 for the names of the built-in corpora ("small", "default"), which no upload may take. */
int corpora_name_reserved(const char *name);
/* The shared tokenizers (NULL when its files are missing; gpt2 then reports why in the log). */
const tokenizer *corpora_tokenizer(corpora *c, const char *encoding);
/* Vocabulary size of a corpus's tokenizer, or -1 if the corpus is unknown or not ready. */
int corpora_vocab(corpora *c, const char *name);
/* Loads a ready corpus's tokens. */
engine_status corpora_open(corpora *c, const char *name, corpus **out, engine_error *err);
/* The folder of a corpus (for uploads): <data-dir>/corpora/<name>. */
void corpora_dir(corpora *c, const char *name, char *buf, size_t len);
/* Tokenizes <dir>/upload.txt into tokens.u16 and marks the corpus ready (or failed). Runs on a
 * probe worker. */
void corpora_tokenize_upload(corpora *c, const char *name, const char *encoding);
/* Removes a corpus's folder after its row was deleted. */
void corpora_remove_files(corpora *c, const char *name);

#endif
