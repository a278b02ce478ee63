/* The state of a watched run and its two renderings: a one-line bar redrawn in place on a
 * terminal, and plain lines for pipes and logs. Pure formatting: no I/O, no clock. */
#ifndef ATTNLAB_PROGRESS_H
#define ATTNLAB_PROGRESS_H

#include <jansson.h>
#include <stddef.h>

typedef struct {
    long long run_id;
    long long step, total;   /* total 0: unknown */
    double eta_s;            /* < 0: unknown */
    double tokens_per_s;     /* < 0: unknown */
    double loss, val_loss;   /* NaN: not seen yet */
    double tau_min, tau_max; /* over every tau.L.H key of the latest metrics; NaN: none */
    char status[24];         /* "" until known */
    char error[256];         /* the run's error message, when it failed */
} progress_state;

void progress_init(progress_state *s, long long run_id);
/* Folds one "metrics" event's data object in. Returns 0, or -1 when it is not that shape. */
int progress_apply_metrics(progress_state *s, const json_t *data);
/* Folds a "status" event's data, or a whole run object from GET /api/runs/{id}. -1 on wrong shape. */
int progress_apply_status(progress_state *s, const json_t *data);
/* 1 when status is one a run never leaves (succeeded, failed, cancelled, interrupted). */
int progress_is_final(const char *status);

/* A duration as "42s", "5m10s", "2h03m", or "?" when negative or not finite. Returns buf. */
const char *progress_duration(double s, char *buf, size_t len);
/* The terminal line, fitted into width columns (UTF-8, uses "τ" and block characters). The bar
 * shrinks first; the tail fields are dropped when even that is not enough. Returns buf. */
const char *progress_bar_line(const progress_state *s, int width, char *buf, size_t len);
/* The pipe line: ASCII, "key value" pairs, no bar. Returns buf. */
const char *progress_plain_line(const progress_state *s, char *buf, size_t len);
/* The closing line: "run 7 succeeded at step 20/20, loss 4.12" (+ the error when failed). */
const char *progress_final_line(const progress_state *s, char *buf, size_t len);

#endif
