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

/* A search (store_search_ok) written for a dialect: each word (only letters, digits and UTF-8
 * bytes) between before and after, joined by join: ("\"", "\"*", " AND ") an FTS5 query, ("'",
 * "':*", " & ") a PostgreSQL tsquery. -1 for a search store_search_ok refuses or one that does not
 * fit len. */
int store_search_spell(const char *q, const char *before, const char *after, const char *join, char *out, size_t len);
/* A run of an experiment that asked for the name `asked` and took `taken`: its name with a leading
 * "asked/" written "taken/" (a new string), or NULL when it needs no change (or out of memory: then
 * the run keeps its name). */
char *store_run_name_after(const char *run_name, const char *asked, const char *taken);
/* A backend's insert of one run of experiment_id (the id written to *id). */
typedef store_status (*store_run_insert_fn)(void *backend, const store_new_run *run, long long experiment_id,
                                            long long *id);
/* The runs of an experiment inserted in order through insert, each renamed after the experiment's
 * name (store_run_name_after: asked -> taken; both NULL: as given); ids[i] gets run i's id. Stops
 * at the first status other than STORE_OK and returns it. */
store_status store_runs_insert(const store_new_run *runs, size_t n, const char *asked, const char *taken,
                               long long experiment_id, store_run_insert_fn insert, void *backend, long long *ids);
/* The ids of runs just created handed to the caller: on STORE_OK ids[0..n) to run_ids and id to
 * *exp_id (when exp_id is not NULL); ids is freed either way. Returns s. */
store_status store_runs_created(store_status s, long long id, long long *exp_id, long long *ids, long long *run_ids,
                                size_t n);
/* The longest text store_search_spell writes with before, after and join of at most 5 bytes each. */
#define STORE_SEARCH_SPELL_MAX (STORE_SEARCH_MAX_WORDS * (STORE_SEARCH_MAX_WORD + 16) + 1)

/* 1 when a metric key matches keys: a comma-separated list of names and prefixes ("tau.*"); NULL
 * or "" matches every key. */
int store_key_matches(const char *key, const char *keys);
/* The number of points a range read (store_metrics_range) returns at most for a limit asked: 1 for 0,
 * STORE_METRICS_RANGE_MAX above it. */
size_t store_range_limit(size_t limit);

/* A probe's result object as stored: *rest_text its JSON text without "tables" (NULL when result
 * is NULL), *tables its "tables" array (a new reference, NULL when it has none). -1 when out of
 * memory (nothing to free then). */
int store_probe_split(const json_t *result, char **rest_text, json_t **tables);

/* Inserts the tables of probe probe_id (an array of {"name","columns","rows"}; NULL: none) one by
 * one: insert(ctx, probe_id, i, name, columns, rows) with columns and rows as JSON text; the first
 * status that is not STORE_OK ends it. A table without a name, columns or rows is STORE_ERROR. */
typedef store_status (*store_table_insert_fn)(void *ctx, long long probe_id, long long i, const char *name,
                                              const char *columns, const char *rows);
store_status store_probe_tables_insert(long long probe_id, const json_t *tables, store_table_insert_fn insert,
                                       void *ctx);

/* Puts tables (stolen; a new array of a probe's tables, NULL when it could not be made) into the
 * probe's result as "tables" when s is STORE_OK, and frees them otherwise. Returns the outcome. */
store_status store_probe_attach_tables(json_t *result, json_t *tables, store_status s);

/* A growing list of run ids: push, then done hands it out (store.h's rule for outputs). */
typedef struct {
    long long *v;
    int n, cap;
} store_ids;
/* -1 when out of memory (recorded as "`what`: out of memory"). */
int store_ids_push(store_ids *ids, long long id, const char *what);
store_status store_ids_done(store_status s, store_ids *ids, long long **out, int *n);

/* {"queued":0, "running":0, …} with every status of store_run_statuses; NULL when out of memory. */
json_t *store_run_counts_zero(void);

/* The ending of every list: on STORE_OK *out gets list and *total (may be NULL) count; otherwise
 * list is freed and the outputs stay NULL/0. Returns s. */
store_status store_list_done(store_status s, json_t *list, long long count, json_t **out, long long *total);

#endif
