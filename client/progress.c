#include "progress.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "table.h"

void progress_init(progress_state *s, long long run_id) {
    memset(s, 0, sizeof *s);
    s->run_id = run_id;
    s->eta_s = -1;
    s->tokens_per_s = -1;
    s->loss = s->val_loss = NAN;
    s->tau_min = s->tau_max = NAN;
}

static int get_ll(const json_t *o, const char *k, long long *v) {
    json_t *j = json_object_get(o, k);
    if (json_is_integer(j))
        *v = json_integer_value(j);
    else if (json_is_real(j))
        *v = (long long)json_real_value(j);
    else
        return 0;
    return 1;
}

static int get_num(const json_t *o, const char *k, double *v) {
    json_t *j = json_object_get(o, k);
    if (!json_is_number(j)) return 0;
    *v = json_number_value(j);
    return 1;
}

int progress_apply_metrics(progress_state *s, const json_t *data) {
    if (!json_is_object(data)) return -1;
    get_ll(data, "step", &s->step);
    get_ll(data, "total_steps", &s->total);
    get_num(data, "eta_s", &s->eta_s);
    get_num(data, "tokens_per_s", &s->tokens_per_s);
    json_t *values = json_object_get(data, "values");
    if (json_is_object(values)) {
        get_num(values, "loss", &s->loss);
        get_num(values, "val_loss", &s->val_loss);
        get_num(values, "tokens_per_s", &s->tokens_per_s);
        /* The τ range is over this event's heads only: a head that stopped reporting is gone. */
        double lo = INFINITY, hi = -INFINITY;
        const char *k;
        json_t *v;
        json_object_foreach(values, k, v) {
            if (strncmp(k, "tau.", 4) || !json_is_number(v)) continue;
            double x = json_number_value(v);
            if (x < lo) lo = x;
            if (x > hi) hi = x;
        }
        if (lo <= hi) s->tau_min = lo, s->tau_max = hi;
    }
    if (!s->status[0] || !strcmp(s->status, "queued")) snprintf(s->status, sizeof s->status, "running");
    return 0;
}

int progress_apply_status(progress_state *s, const json_t *data) {
    if (!json_is_object(data)) return -1;
    const char *st = json_string_value(json_object_get(data, "status"));
    if (!st) return -1;
    snprintf(s->status, sizeof s->status, "%s", st);
    get_ll(data, "step", &s->step);
    get_ll(data, "total_steps", &s->total);
    get_num(data, "eta_s", &s->eta_s);
    get_num(data, "tokens_per_s", &s->tokens_per_s);
    const char *err = json_string_value(json_object_get(data, "error"));
    if (err) snprintf(s->error, sizeof s->error, "%s", err);
    json_t *last = json_object_get(data, "last");
    if (json_is_object(last)) {
        /* The run's brief: {"loss":{"last","min"}, "val_loss":{...}, "tau":{"min","max"}}; bare
         * numbers (and tau.L.H keys) are read too. */
        const json_t *lv;
        if ((lv = cli_last_value(json_object_get(last, "loss")))) s->loss = json_number_value(lv);
        if ((lv = cli_last_value(json_object_get(last, "val_loss")))) s->val_loss = json_number_value(lv);
        json_t *tau = json_object_get(last, "tau");
        if (json_is_number(json_object_get(tau, "min")) && json_is_number(json_object_get(tau, "max"))) {
            s->tau_min = json_number_value(json_object_get(tau, "min"));
            s->tau_max = json_number_value(json_object_get(tau, "max"));
        }
        double lo = INFINITY, hi = -INFINITY;
        const char *k;
        json_t *v;
        json_object_foreach(last, k, v) {
            if (strncmp(k, "tau.", 4) || !json_is_number(v)) continue;
            double x = json_number_value(v);
            if (x < lo) lo = x;
            if (x > hi) hi = x;
        }
        if (lo <= hi) s->tau_min = lo, s->tau_max = hi;
    }
    return 0;
}

int progress_is_final(const char *status) {
    return !strcmp(status, "succeeded") || !strcmp(status, "failed") || !strcmp(status, "cancelled") ||
           !strcmp(status, "interrupted");
}

const char *progress_duration(double s, char *buf, size_t len) {
    if (!(s >= 0) || !isfinite(s)) {
        snprintf(buf, len, "?");
        return buf;
    }
    long long t = (long long)(s + 0.5);
    if (t < 60)
        snprintf(buf, len, "%llds", t);
    else if (t < 3600)
        snprintf(buf, len, "%lldm%02llds", t / 60, t % 60);
    else
        snprintf(buf, len, "%lldh%02lldm", t / 3600, (t % 3600) / 60);
    return buf;
}

static const char *rate(double r, char *buf, size_t len) {
    if (!(r >= 0))
        snprintf(buf, len, "?");
    else if (r >= 1e6)
        snprintf(buf, len, "%.1fM", r / 1e6);
    else if (r >= 1e4)
        snprintf(buf, len, "%.1fk", r / 1e3);
    else
        snprintf(buf, len, "%.0f", r);
    return buf;
}

/* The fields after the bar, longest form; each is dropped from the right when space runs out. */
static int tail_fields(const progress_state *s, int utf8, char f[5][96]) {
    char d[32], r[32];
    int n = 0;
    double pct = s->total > 0 ? 100.0 * (double)s->step / (double)s->total : 0;
    if (s->total > 0)
        snprintf(f[n++], 96, "%lld/%lld %3.0f%%", s->step, s->total, pct);
    else
        snprintf(f[n++], 96, "step %lld", s->step);
    snprintf(f[n++], 96, "ETA %s", progress_duration(s->eta_s, d, sizeof d));
    if (isfinite(s->loss)) snprintf(f[n++], 96, "loss %.4f", s->loss);
    if (isfinite(s->tau_min)) snprintf(f[n++], 96, utf8 ? "τ %.4f–%.4f" : "tau %.4f..%.4f", s->tau_min, s->tau_max);
    snprintf(f[n++], 96, "%s tok/s", rate(s->tokens_per_s, r, sizeof r));
    return n;
}

const char *progress_bar_line(const progress_state *s, int width, char *buf, size_t len) {
    char f[5][96];
    int nf = tail_fields(s, 1, f);
    char head[48];
    snprintf(head, sizeof head, "run %lld ", s->run_id);
    if (width < 20) width = 20;
    /* A bar of fixed length for the terminal's width, so that it does not jitter as the figures
     * after it change; tail fields are dropped from the right when they do not fit beside it. */
    int cells = width >= 100 ? 30 : width >= 80 ? 20 : 10;
    size_t used;
    for (;; nf--) {
        used = table_display_width(head) + 2; /* [ ] */
        for (int i = 0; i < nf; i++) used += 2 + table_display_width(f[i]);
        if ((int)used + cells <= width || nf == 1) break;
    }
    if ((int)used + cells > width) cells = width - (int)used > 0 ? width - (int)used : 0;
    double frac = s->total > 0 ? (double)s->step / (double)s->total : 0;
    if (frac > 1) frac = 1;
    if (frac < 0) frac = 0;
    int full = (int)(frac * cells);
    size_t o = 0;
    o += (size_t)snprintf(buf + o, len - o, "%s[", head);
    for (int i = 0; i < cells && o + 4 < len; i++) {
        const char *c = i < full ? "█" : "·";
        size_t k = strlen(c);
        memcpy(buf + o, c, k);
        o += k;
    }
    if (o < len) o += (size_t)snprintf(buf + o, len - o, "]");
    for (int i = 0; i < nf && o < len; i++) o += (size_t)snprintf(buf + o, len - o, "  %s", f[i]);
    if (o >= len) buf[len - 1] = 0;
    return buf;
}

const char *progress_plain_line(const progress_state *s, char *buf, size_t len) {
    char d[32], r[32];
    size_t o = 0;
    o += (size_t)snprintf(buf + o, len - o, "run %lld step %lld/%lld", s->run_id, s->step, s->total);
    if (s->total > 0 && o < len)
        o += (size_t)snprintf(buf + o, len - o, " (%.0f%%)", 100.0 * (double)s->step / (double)s->total);
    if (o < len) o += (size_t)snprintf(buf + o, len - o, " eta %s", progress_duration(s->eta_s, d, sizeof d));
    if (o < len) o += (size_t)snprintf(buf + o, len - o, " tokens/s %s", rate(s->tokens_per_s, r, sizeof r));
    if (isfinite(s->loss) && o < len) o += (size_t)snprintf(buf + o, len - o, " loss %.4f", s->loss);
    if (isfinite(s->tau_min) && o < len)
        o += (size_t)snprintf(buf + o, len - o, " tau %.4f..%.4f", s->tau_min, s->tau_max);
    if (o >= len) buf[len - 1] = 0;
    return buf;
}

const char *progress_final_line(const progress_state *s, char *buf, size_t len) {
    size_t o = 0;
    o += (size_t)snprintf(buf + o, len - o, "run %lld %s at step %lld/%lld", s->run_id,
                          s->status[0] ? s->status : "ended", s->step, s->total);
    if (isfinite(s->loss) && o < len) o += (size_t)snprintf(buf + o, len - o, ", loss %.4f", s->loss);
    if (isfinite(s->val_loss) && o < len) o += (size_t)snprintf(buf + o, len - o, ", val_loss %.4f", s->val_loss);
    if (isfinite(s->tau_min) && o < len)
        o += (size_t)snprintf(buf + o, len - o, ", tau %.4f..%.4f", s->tau_min, s->tau_max);
    if (s->error[0] && o < len) o += (size_t)snprintf(buf + o, len - o, ": %s", s->error);
    if (o >= len) buf[len - 1] = 0;
    return buf;
}
