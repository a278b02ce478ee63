/* The corpus service: the workflows of corpora between the handlers and the catalogue (corpora.h):
 * an upload from the request's file to its tokenization queued, a task corpus generated from its
 * config, a corpus deleted with its files, and the catalogue with what training can draw from each
 * corpus. Handlers parse and reply; this holds the rules and undoes what a failed step left. */
#ifndef ATTNLAB_SVC_CORPORA_H
#define ATTNLAB_SVC_CORPORA_H

#include <jansson.h>
#include <stddef.h>

#include "services/svc.h"

struct app;

/* Every corpus (built-in ones first), each with "windows" and "window_tokens": how many windows of
 * the RunConfig's default seq_len a training run can draw from it. */
svc_status svc_corpora_list(struct app *a, json_t **out, svc_error *err);
/* One corpus's row; SVC_NOT_FOUND for an unknown or impossible name. */
svc_status svc_corpora_get(struct app *a, const char *name, json_t **out, svc_error *err);

/* Takes an upload: the text at upload_path (size bytes, moved away on success) becomes corpus
 * `name`, tokenized with `encoding` ("gpt2" or "bytes"; NULL: gpt2) on the probe queue: its row is created
 * (status "tokenizing"), its folder made and the text moved into it, and the tokenization queued;
 * a step that fails undoes the ones before. *out: the row as it is now. SVC_INVALID (name, body,
 * a tokenizer not available here), SVC_CONFLICT (a built-in name, a name taken), SVC_BUSY (the
 * probe queue is full), SVC_FAILED. */
svc_status svc_corpora_upload(struct app *a, const char *name, const char *encoding, const char *upload_path,
                              size_t size, json_t **out, svc_error *err);

/* Generates task corpus `name` from spec (corpora_task_config_parse's object): *created 1 when it
 * was made, 0 when a ready one with the same config was there already; *out its row. SVC_INVALID
 * (name, config field), SVC_CONFLICT (a built-in name, the name holds something else), SVC_FAILED. */
svc_status svc_corpora_create_task(struct app *a, const char *name, const json_t *spec, json_t **out, int *created,
                                   svc_error *err);

/* The kinds of task corpora (the engine's table, tasks.h: each with its parameters, default
 * offsets and answer buckets) and the fields every kind shares (the schema's bounds):
 * {"kinds": […], "fields": […]}. */
svc_status svc_corpora_task_kinds(json_t **out, svc_error *err);

/* Deletes a corpus and its files: SVC_NOT_FOUND, SVC_CONFLICT (built in, or used by a run). */
svc_status svc_corpora_delete(struct app *a, const char *name, svc_error *err);

#endif
