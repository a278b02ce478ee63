/* What a store query is asked, the same for both backends: the orders of the runs list (which
 * column or series, which way; each backend spells them in its dialect), the check of a config
 * filter's key, the match of metric keys, a probe's result split into its row and its tables, and
 * the endings every list shares. Nothing here touches a database. */
#ifndef ATTNLAB_STORE_QUERY_H
#define ATTNLAB_STORE_QUERY_H

#include <jansson.h>
#include <stddef.h>

#include "store/store.h"

/* A backend's way of writing an ORDER BY: what follows a text column to compare it byte by byte
 * ("" when the database does already), and whether it writes NULLS LAST (else "x IS NULL, x"). */
typedef struct {
    const char *text_collate;
    int nulls_last;
} store_order_dialect;

/* The ORDER BY clause of store_run_list for f->sort (store_run_sorts; NULL or unknown: newest
 * first) into buf: a fixed text for each sort, never the request's. */
void store_run_order_sql(const char *sort, const store_order_dialect *d, char *buf, size_t len);

/* 1 when a metric key matches keys: a comma-separated list of names and prefixes ("tau.*"); NULL
 * or "" matches every key. */
int store_key_matches(const char *key, const char *keys);

/* A probe's result object as stored: *rest_text its JSON text without "tables" (NULL when result
 * is NULL), *tables its "tables" array (a new reference, NULL when it has none). -1 when out of
 * memory (nothing to free then). */
int store_probe_split(const json_t *result, char **rest_text, json_t **tables);
/* Table i of a probe's tables as stored: its name, and its columns and rows as JSON text (free
 * both). -1 when the table lacks one of them. */
int store_probe_table_parts(const json_t *table, const char **name, char **columns, char **rows);

/* {"queued":0, "running":0, …} with every status of store_run_statuses; NULL when out of memory. */
json_t *store_run_counts_zero(void);

/* The ending of every list: on STORE_OK *out gets list and *total (may be NULL) count; otherwise
 * list is freed and the outputs stay NULL/0. Returns s. */
store_status store_list_done(store_status s, json_t *list, long long count, json_t **out, long long *total);

#endif
