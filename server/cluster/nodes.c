/* This process as a node: see nodes.h. */
#include "cluster/nodes.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/run_status.h"
#include "util/log.h"
#include "store/store_nodes.h"
#include "util/json_text.h"

struct nodes {
    nodes_config cfg;
    char id[128], host[256], url[256], role[16], version[32];
    pthread_mutex_t lock;
    pthread_cond_t cv;
    int stopping;
    pthread_t beat;
    int beating;
    atomic_ullong relayed_metrics, relayed_status, heartbeats_failed;
};

int nodes_role_valid(const char *role) {
    return role && (!strcmp(role, "api") || !strcmp(role, "worker") || !strcmp(role, "all"));
}

const char *nodes_id(const nodes *n) { return n->id; }
double nodes_stale_seconds(const nodes *n) { return n->cfg.stale_s; }

int nodes_default_id(const char *data_dir, char *buf, size_t len) {
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/node-id", data_dir);
    FILE *f = fopen(path, "r");
    if (f) {
        char line[128] = "";
        int ok = fgets(line, sizeof line, f) != NULL;
        fclose(f);
        line[strcspn(line, "\r\n")] = 0;
        if (ok && line[0]) {
            snprintf(buf, len, "%s", line);
            return 0;
        }
    }
    char host[64] = "node";
    if (gethostname(host, sizeof host) != 0) snprintf(host, sizeof host, "node");
    host[sizeof host - 1] = 0;
    for (char *p = host; *p; p++)
        if (!(*p == '-' || *p == '.' || (*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'z') ||
              (*p >= 'A' && *p <= 'Z')))
            *p = '-';
    unsigned char r[3] = {0};
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd < 0 || read(fd, r, sizeof r) != (ssize_t)sizeof r) {
        if (fd >= 0) close(fd);
        return -1;
    }
    close(fd);
    snprintf(buf, len, "%s-%02x%02x%02x", host, r[0], r[1], r[2]);
    char tmp[PATH_MAX + 8];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    f = fopen(tmp, "w");
    if (!f) return -1;
    int bad = fprintf(f, "%s\n", buf) < 0;
    bad |= fclose(f) != 0;
    if (bad || rename(tmp, path) != 0) {
        unlink(tmp);
        return -1;
    }
    return 0;
}

/* ---- what the other nodes say ------------------------------------------------------------------- */

/* Publishes another node's stored points of run_id, steps from..to with wall times in w0..w1 (the
 * batch that was stored: a step's evaluation point may come a batch after its other points), as
 * this node's metrics events (one per step, in order, shaped like the training job's own). */
static void relay_metrics(nodes *n, long long run_id, int from, int to, double w0, double w1) {
    store_metric *pts = NULL;
    size_t np = 0;
    if (store_metrics_points(n->cfg.store, run_id, NULL, from, &pts, &np) != STORE_OK || np == 0) return;
    json_t *run = NULL;
    long long total = 0;
    if (store_run_get(n->cfg.store, run_id, &run) == STORE_OK)
        total = json_integer_value(json_object_get(run, "total_steps"));
    json_decref(run);
    /* pts is ordered by key, then step: walk the steps in order and pick each key's point. */
    for (int step = from; step <= to; step++) {
        json_t *values = json_object();
        double wall = 0, tps = 0;
        int any = 0;
        for (size_t i = 0; i < np; i++) {
            if (pts[i].step != step || pts[i].wall_time < w0 || pts[i].wall_time > w1) continue;
            if (json_object_set_new(values, pts[i].key, json_real(pts[i].value)) < 0) continue; /* out of memory */
            if (!strcmp(pts[i].key, "tokens_per_s")) tps = pts[i].value;
            wall = pts[i].wall_time;
            any = 1;
        }
        if (!any) {
            json_decref(values);
            continue;
        }
        /* The ETA from the pace of the points just stored (the training node knows it better). */
        double eta = 0;
        if (to > from) {
            double t0 = 0, t1 = 0;
            for (size_t i = 0; i < np; i++) {
                if (pts[i].step == from && !t0) t0 = pts[i].wall_time;
                if (pts[i].step == to) t1 = pts[i].wall_time;
            }
            if (t1 > t0) eta = (double)(total - step) * (t1 - t0) / (to - from);
        }
        json_t *ev = json_pack("{s:I, s:i, s:I, s:f, s:f, s:f, s:o}", "run_id", (json_int_t)run_id, "step", step,
                               "total_steps", (json_int_t)total, "wall_time", wall, "eta_s", eta > 0 ? eta : 0.0,
                               "tokens_per_s", tps, "values", values);
        char *text = ev ? json_text_dumps(ev, JSON_COMPACT) : NULL;
        if (text) events_publish(n->cfg.events, run_id, "metrics", text);
        free(text);
        json_decref(ev);
        n->relayed_metrics++;
    }
    free(pts);
}

static void relay_status(nodes *n, long long run_id) {
    run_status_publish(n->cfg.events, n->cfg.store, run_id);
    n->relayed_status++;
}

static void on_notify(void *ctx, const char *channel, const char *payload) {
    nodes *n = ctx;
    if (!strcmp(channel, "attnlab_jobs")) {
        if (n->cfg.queue) queue_wake(n->cfg.queue);
        return;
    }
    if (!strcmp(channel, "reconnected")) {
        log_info("nodes: heard from the database again; runs queued meanwhile are picked up by the next claim");
        if (n->cfg.queue) queue_wake(n->cfg.queue);
        return;
    }
    json_t *o = json_loads(payload, 0, NULL);
    long long run_id = json_integer_value(json_object_get(o, "run"));
    if (run_id > 0 && !strcmp(channel, "attnlab_cancel")) {
        if (n->cfg.queue) queue_cancel_heard(n->cfg.queue, run_id);
    } else if (run_id > 0 && !strcmp(channel, "attnlab_events")) {
        const char *t = json_string_value(json_object_get(o, "t"));
        if (t && !strcmp(t, "m"))
            relay_metrics(n, run_id, (int)json_integer_value(json_object_get(o, "from")),
                          (int)json_integer_value(json_object_get(o, "to")),
                          json_number_value(json_object_get(o, "w0")), json_number_value(json_object_get(o, "w1")));
        else if (t && !strcmp(t, "s"))
            relay_status(n, run_id);
    }
    json_decref(o);
}

/* ---- presence ------------------------------------------------------------------------------------ */

static store_status register_self(nodes *n) {
    store_node row = {.id = n->id,
                      .host = n->host,
                      .url = n->url,
                      .role = n->role,
                      .version = n->version,
                      .capacity = n->cfg.capacity,
                      .pid = (long)getpid()};
    return store_node_register(n->cfg.store, &row);
}

static void *beat_loop(void *arg) {
    nodes *n = arg;
    long every_ms = (long)(n->cfg.heartbeat_s * 1000);
    if (every_ms < 50) every_ms = 50;
    pthread_mutex_lock(&n->lock);
    while (!n->stopping) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += every_ms / 1000;
        ts.tv_nsec += (every_ms % 1000) * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        while (!n->stopping && pthread_cond_timedwait(&n->cv, &n->lock, &ts) != ETIMEDOUT) {}
        if (n->stopping) break;
        pthread_mutex_unlock(&n->lock);
        store_status s = store_node_heartbeat(n->cfg.store, n->id);
        if (s == STORE_NOT_FOUND) s = register_self(n); /* someone removed the row: put it back */
        pthread_mutex_lock(&n->lock);
        if (s != STORE_OK) n->heartbeats_failed++;
    }
    pthread_mutex_unlock(&n->lock);
    return NULL;
}

nodes *nodes_start(const nodes_config *cfg, char *err, size_t errlen) {
    nodes *n = calloc(1, sizeof *n);
    if (!n) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    n->cfg = *cfg;
    snprintf(n->id, sizeof n->id, "%s", cfg->id);
    snprintf(n->host, sizeof n->host, "%s", cfg->host ? cfg->host : "");
    snprintf(n->url, sizeof n->url, "%s", cfg->url ? cfg->url : "");
    snprintf(n->role, sizeof n->role, "%s", cfg->role ? cfg->role : "all");
    snprintf(n->version, sizeof n->version, "%s", cfg->version ? cfg->version : "");
    if (n->cfg.heartbeat_s <= 0) n->cfg.heartbeat_s = 5;
    if (n->cfg.stale_s <= 0) n->cfg.stale_s = 3 * n->cfg.heartbeat_s;
    pthread_mutex_init(&n->lock, NULL);
    pthread_cond_init(&n->cv, NULL);
    store_set_node(cfg->store, n->id);
    if (register_self(n) != STORE_OK) {
        snprintf(err, errlen, "cannot record this node: %s", store_last_error());
        nodes_stop(n);
        nodes_free(n);
        return NULL;
    }
    if (pthread_create(&n->beat, NULL, beat_loop, n) != 0) {
        snprintf(err, errlen, "cannot start the node heartbeat");
        nodes_stop(n);
        nodes_free(n);
        return NULL;
    }
    n->beating = 1;
    if (store_listen(cfg->store, on_notify, n) != STORE_OK) {
        snprintf(err, errlen, "cannot listen for other nodes: %s", store_last_error());
        nodes_stop(n);
        nodes_free(n);
        return NULL;
    }
    return n;
}

void nodes_stop(nodes *n) {
    if (!n) return;
    pthread_mutex_lock(&n->lock);
    n->stopping = 1;
    pthread_cond_broadcast(&n->cv);
    pthread_mutex_unlock(&n->lock);
    if (n->beating) pthread_join(n->beat, NULL);
    if (store_node_stopped(n->cfg.store, n->id) != STORE_OK) log_warn("nodes: could not record this node as stopped");
}

void nodes_free(nodes *n) {
    if (!n) return;
    pthread_mutex_destroy(&n->lock);
    pthread_cond_destroy(&n->cv);
    free(n);
}

void nodes_prometheus(nodes *n, FILE *out) {
    if (!n) return;
    unsigned long long rm = atomic_load(&n->relayed_metrics), rs = atomic_load(&n->relayed_status),
                       hf = atomic_load(&n->heartbeats_failed);
    fprintf(out,
            "# HELP attnlab_node_info This node: its id and role.\n# TYPE attnlab_node_info gauge\n"
            "attnlab_node_info{node=\"%s\",role=\"%s\",shared=\"%s\"} 1\n",
            n->id, n->role, store_shared(n->cfg.store) ? "true" : "false");
    fprintf(out,
            "# HELP attnlab_node_capacity Trainings this node runs at once.\n# TYPE attnlab_node_capacity gauge\n"
            "attnlab_node_capacity %d\n",
            n->cfg.capacity);
    if (n->cfg.queue)
        fprintf(out,
                "# HELP attnlab_node_leases Runs this node holds a lease on.\n# TYPE attnlab_node_leases gauge\n"
                "attnlab_node_leases %d\n"
                "# HELP attnlab_node_claims_total Runs this node claimed from the shared queue.\n"
                "# TYPE attnlab_node_claims_total counter\nattnlab_node_claims_total %llu\n",
                queue_held(n->cfg.queue), queue_claims(n->cfg.queue));
    fprintf(out,
            "# HELP attnlab_node_relayed_events_total Other nodes' events published here, by type.\n"
            "# TYPE attnlab_node_relayed_events_total counter\n"
            "attnlab_node_relayed_events_total{type=\"metrics\"} "
            "%llu\nattnlab_node_relayed_events_total{type=\"status\"} %llu\n"
            "# HELP attnlab_node_heartbeats_failed_total Heartbeats the database did not take.\n"
            "# TYPE attnlab_node_heartbeats_failed_total counter\nattnlab_node_heartbeats_failed_total %llu\n",
            rm, rs, hf);
}
