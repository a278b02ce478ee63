/* System routes: health, the OpenAPI document, Prometheus metrics. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>

#include "api/api.h"
#include "core/checkpoints.h"
#include "engine/kernel_path.h"
#include "core/run_config.h"

/* Below this much free space where checkpoints and corpora go, health says the disk is full (a
 * checkpoint of the smallest model no longer fits; small volumes are fine until then). */
#define HEALTH_MIN_FREE_BYTES (1ull << 20)

/* Health: 200 and status "ok" when the database answers, the metrics writer is storing and the
 * data directory has room; else 503, "degraded", and the failing part with its reason (db_error,
 * writes_error; no server paths). A full disk shows as writes failing, or as disk "full". */
/* {"path": the process's kernel path, "default_precision", "paths": [{"name", "unit", "precision",
 * "supported", "reason" (when not), "gflops" (one thread's measured rate of its unit, when measured)}]}:
 * what this machine computes with (engine/kernel_path.h). */
static json_t *kernel_paths_json(void) {
    json_t *paths = json_array();
    int bad = !paths;
    for (int i = 0; i < KERNEL_PATH_COUNT && !bad; i++) {
        const kernel_path *k = kernel_path_row((kernel_path_id)i);
        char why[160] = "";
        int ok = kernel_path_supported((kernel_path_id)i, why, sizeof why);
        json_t *o = json_pack("{s:s, s:s, s:s, s:b}", "name", k->name, "unit", k->unit, "precision",
                              precision_name(k->precision), "supported", ok);
        if (o && !ok) bad |= json_object_set_new(o, "reason", json_string(why)) < 0;
        double rate = k->measured && ok ? kernel_path_rate((kernel_path_id)i) : 0;
        if (o && rate > 0) bad |= json_object_set_new(o, "gflops", json_real(rate / 1e9)) < 0;
        bad |= json_array_append_new(paths, o) < 0;
    }
    if (bad) {
        json_decref(paths);
        return NULL;
    }
    return json_pack("{s:s, s:s, s:o}", "path", kernel_path_name(), "default_precision",
                     precision_name(precision_default()), "paths", paths);
}

void api_health(http_request *req, const api_ctx *api) {
    int db_ok = store_ping(api->svc->store) == STORE_OK;
    char why[256];
    double failing_s = 0;
    int writes_ok = !metrics_writer_failing(api->writer, &failing_s, why, sizeof why);
    struct statvfs vfs;
    int have_disk = statvfs(api->svc->data_dir, &vfs) == 0;
    unsigned long long free_bytes = have_disk ? (unsigned long long)vfs.f_bavail * vfs.f_frsize : 0;
    int disk_ok = !have_disk || free_bytes >= HEALTH_MIN_FREE_BYTES;
    int ok = db_ok && writes_ok && disk_ok;
    json_t *body =
        json_pack("{s:s, s:s, s:s, s:s, s:f, s:i}", "status", ok ? "ok" : "degraded", "version", ATTNLAB_VERSION, "db",
                  db_ok ? "ok" : "error", "writes", writes_ok ? "ok" : "failing", "uptime_s",
                  app_now() - api->started_at, "schema_version", store_schema_version(api->svc->store));
    /* Why the database is not usable (it cannot be written, its file is gone). */
    int bad = !body;
    if (!db_ok && !bad) bad |= json_object_set_new(body, "db_error", json_string(store_last_error())) < 0;
    if (!writes_ok && !bad) {
        bad |= json_object_set_new(body, "writes_error", json_string(why)) < 0;
        bad |= json_object_set_new(body, "writes_failing_s", json_real(failing_s)) < 0;
    }
    if (have_disk && !bad) {
        bad |= json_object_set_new(body, "disk", json_string(disk_ok ? "ok" : "full")) < 0;
        bad |= json_object_set_new(body, "disk_free_bytes", json_integer((json_int_t)free_bytes)) < 0;
    }
    if (!bad) bad |= json_object_set_new(body, "kernel", kernel_paths_json()) < 0;
    if (bad) { /* http_reply_json answers 500 for what could not be built */
        json_decref(body);
        body = NULL;
    }
    http_reply_json(req, ok ? 200 : 503, body);
}

void api_openapi(http_request *req, const api_ctx *api) {
    (void)api;
    http_reply_json(req, 200, json_incref((json_t *)run_config_openapi()));
}

/* Runs in the store by status; this process's training jobs and their throughput. */
static void prom_training(FILE *f, const api_ctx *api) {
    json_t *counts = NULL;
    fprintf(f, "# HELP attnlab_runs Runs in the database by status.\n# TYPE attnlab_runs gauge\n");
    if (store_run_counts(api->svc->store, &counts) == STORE_OK) {
        const char *k;
        json_t *v;
        json_object_foreach(counts, k, v)
            fprintf(f, "attnlab_runs{status=\"%s\"} %lld\n", k, (long long)json_integer_value(v));
    }
    json_decref(counts);
    int queued, running;
    double tps;
    jobs_stats(api->svc->jobs, &queued, &running, &tps);
    fprintf(
        f,
        "# HELP attnlab_training_jobs Training jobs in this process by state.\n# TYPE attnlab_training_jobs gauge\n");
    fprintf(f, "attnlab_training_jobs{state=\"queued\"} %d\nattnlab_training_jobs{state=\"running\"} %d\n", queued,
            running);
    fprintf(f,
            "# HELP attnlab_training_tokens_per_second Tokens per second over all running trainings.\n"
            "# TYPE attnlab_training_tokens_per_second gauge\nattnlab_training_tokens_per_second %.1f\n",
            tps);
}

/* Answers by status code, and open live streams. */
static void prom_http(FILE *f, const api_ctx *api) {
    uint64_t status_counts[600];
    http_server_status_counts(api->http, status_counts);
    fprintf(f, "# HELP attnlab_http_requests_total HTTP requests answered, by status code.\n"
               "# TYPE attnlab_http_requests_total counter\n");
    for (int i = 100; i < 600; i++)
        if (status_counts[i])
            fprintf(f, "attnlab_http_requests_total{code=\"%d\"} %llu\n", i, (unsigned long long)status_counts[i]);
    fprintf(f,
            "# HELP attnlab_event_subscribers Open live streams.\n# TYPE attnlab_event_subscribers gauge\n"
            "attnlab_event_subscribers %zu\n",
            events_subscriber_count(api->svc->events));
}

/* This node: id, role, capacity, leases, claims. */
static void prom_node(FILE *f, const api_ctx *api) { nodes_prometheus(api->nodes, f); }

/* The reply cache, and checkpoints hashed. */
static void prom_caches(FILE *f, const api_ctx *api) {
    unsigned long long hits, misses;
    size_t cached_bytes;
    reply_cache_stats(api->replies, &hits, &misses, NULL, &cached_bytes);
    fprintf(f,
            "# HELP attnlab_reply_cache_requests_total Metric answers about ended runs, served from the cache "
            "or not.\n# TYPE attnlab_reply_cache_requests_total counter\n"
            "attnlab_reply_cache_requests_total{result=\"hit\"} %llu\n"
            "attnlab_reply_cache_requests_total{result=\"miss\"} %llu\n"
            "# HELP attnlab_reply_cache_bytes Bytes of answers held.\n# TYPE attnlab_reply_cache_bytes gauge\n"
            "attnlab_reply_cache_bytes %zu\n",
            hits, misses, cached_bytes);
    fprintf(f,
            "# HELP attnlab_checkpoint_hashes_total Whole checkpoints hashed (when sealed, or first checked after a "
            "start; not per download).\n# TYPE attnlab_checkpoint_hashes_total counter\n"
            "attnlab_checkpoint_hashes_total %llu\n",
            checkpoint_hashes_computed());
}

/* The compute pool of heavy requests. */
static void prom_heavy(FILE *f, const api_ctx *api) {
    unsigned heavy_running, heavy_queued;
    unsigned long long heavy_admitted, heavy_refused, heavy_cancelled;
    http_server_compute_counts(api->http, &heavy_running, &heavy_queued, &heavy_admitted, &heavy_refused,
                               &heavy_cancelled);
    fprintf(f,
            "# HELP attnlab_heavy_requests Heavy requests (statistics, exports, probes) on the compute pool now.\n"
            "# TYPE attnlab_heavy_requests gauge\n"
            "attnlab_heavy_requests{state=\"running\"} %u\nattnlab_heavy_requests{state=\"waiting\"} %u\n"
            "# HELP attnlab_heavy_requests_total Heavy requests admitted to the compute pool, refused (429, 503), "
            "and cancelled because their client left.\n# TYPE attnlab_heavy_requests_total counter\n"
            "attnlab_heavy_requests_total{result=\"admitted\"} %llu\n"
            "attnlab_heavy_requests_total{result=\"refused\"} %llu\n"
            "attnlab_heavy_requests_total{result=\"cancelled\"} %llu\n",
            heavy_running, heavy_queued, heavy_admitted, heavy_refused, heavy_cancelled);
}

/* The metrics writer, and the uptime. */
static void prom_writes(FILE *f, const api_ctx *api) {
    fprintf(f,
            "# HELP attnlab_series_range_points_max The most metric points one range read of a streamed answer "
            "(metrics, metrics.csv, bundles) has held.\n# TYPE attnlab_series_range_points_max gauge\n"
            "attnlab_series_range_points_max %zu\n",
            store_series_cursor_peak());
    fprintf(f,
            "# HELP attnlab_metric_points_dropped_total Metric points refused because the writer's queue was full.\n"
            "# TYPE attnlab_metric_points_dropped_total counter\nattnlab_metric_points_dropped_total %llu\n",
            (unsigned long long)metrics_writer_dropped(api->writer));
    fprintf(f,
            "# HELP attnlab_metric_write_failures_total Metric writes that failed (their points kept and retried).\n"
            "# TYPE attnlab_metric_write_failures_total counter\nattnlab_metric_write_failures_total %llu\n",
            (unsigned long long)metrics_writer_failures(api->writer));
    fprintf(f,
            "# HELP attnlab_uptime_seconds Seconds since start.\n# TYPE attnlab_uptime_seconds gauge\n"
            "attnlab_uptime_seconds %.0f\n",
            app_now() - api->started_at);
}

/* /metrics in Prometheus's text format: its sections, in order. */
static void (*const prom_sections[])(FILE *f, const api_ctx *api) = {prom_training, prom_http,  prom_node,
                                                                     prom_caches,   prom_heavy, prom_writes};

void api_prometheus(http_request *req, const api_ctx *api) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) {
        http_reply_error(req, 500, "internal", NULL, "out of memory");
        return;
    }
    for (size_t i = 0; i < sizeof prom_sections / sizeof prom_sections[0]; i++) prom_sections[i](f, api);
    fclose(f);
    http_reply_bytes(req, 200, "text/plain; version=0.0.4; charset=utf-8", buf, len);
    free(buf);
}
