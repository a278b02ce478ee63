/* Figures of an experiment as SVG (GET /api/experiments/{id}/plot.svg?kind=…), drawn from the same
 * figures the statistics service gives as JSON (svc_stats.h), so that a README can embed what the
 * service computes rather than a chart drawn by hand. The kinds, one table (svc_plot_kinds):
 *   bands        per variant, the mean of series `key` over its replicates at each step with the
 *                band from their minimum to their maximum (default key val_loss)
 *   forest       the paired differences of `metric` between every two variants (mean a - b over
 *                replicates) with their t interval and their bootstrap interval, and the zero line
 *                (default metric final_val_loss)
 *   tau          tau per head over steps: one line per variant and head, the mean over replicates
 *   head_spread  per variant, max - min of tau over its heads at each step (mean and band over
 *                replicates): the blog's first question, does tau specialise */
#ifndef ATTNLAB_SVC_PLOTS_H
#define ATTNLAB_SVC_PLOTS_H

#include "services/svc.h"

struct app;

typedef struct {
    const char *name;        /* the `kind` query value */
    const char *default_arg; /* the key or metric when none is given (NULL: takes none) */
    const char *arg_name;    /* "key", "metric" or NULL */
    const char *description;
    /* draws the figure of experiment id into *svg (malloc'd), with the contract of svc_plot_experiment */
    svc_status (*draw)(struct app *a, long long id, const char *arg, char **svg, svc_error *err);
} svc_plot_kind;

/* The kinds, NULL-name terminated. */
extern const svc_plot_kind svc_plot_kinds[];

/* The SVG document of figure `kind` of experiment exp_id; arg is the kind's key or metric (NULL:
 * its default). *svg is malloc'd on SVC_OK (NULL otherwise). SVC_INVALID names the field ("kind",
 * "key", "metric"), SVC_NOT_FOUND (field "id") when there is no such experiment, SVC_FAILED when
 * the store or an allocation fails. */
svc_status svc_plot_experiment(struct app *a, long long exp_id, const char *kind, const char *arg, char **svg,
                               svc_error *err);

#endif
