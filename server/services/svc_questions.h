/* Figures that answer the seed blog's open questions (issue 15) over one experiment's runs, read
 * through the store and summarised with stats.h across each variant's replicates. Like svc_stats it
 * never answers a request: the handlers (api_questions.c) present what it returns as JSON or CSV.
 *
 * Q1, head spread (did the heads specialise?): per run, at step `at` (the run's last recorded step
 * at or before it) and at its last step, the per-step metrics the training records:
 *   tau_ratio         max / min of tau over every head of the model (variants with a learned scale)
 *   tau_std           population standard deviation of tau over every head
 *   entropy_frac_std  std over heads of entropy / ln(keys), how differently sharp the heads are
 *                     (every variant, so the fixed-scale ones are compared too)
 *   distance_std      std over heads of the mean attended distance (tokens)
 * and per variant and metric: the summary over replicates at `at` and at the end (n, mean, sample
 * std, t interval) and the paired change end - at (mean, t interval, two-sided p). "answer" puts
 * the tau_ratio figures (entropy_frac_std for a variant without tau) into one sentence per variant.
 *
 * Q2, accuracy (positional precision on task corpora): per run the accuracies of its last
 * evaluation, acc and acc.<bucket> (exact match on answer positions, overall and per offset or
 * distance bucket), and per variant their summary over replicates, with the variant's corpus and
 * task kind.
 *
 * Every run of the experiment is read whatever its status (a long experiment can be looked at while
 * it trains); each run says its status and last step, and the summaries count the runs that have a
 * value. Numbers that cannot be computed are null, with a reason. */
#ifndef ATTNLAB_SVC_QUESTIONS_H
#define ATTNLAB_SVC_QUESTIONS_H

#include <jansson.h>

#include "services/svc.h"

struct app;

#define SVC_QUESTIONS_DEFAULT_AT 2000

/* Q1. {"experiment":{"id","name","replicates"}, "at_step", "conf", "metrics":[{"name","description"}],
 *      "variants":[{"name","attention","learned_scale",
 *                   "runs":[{"id","replicate","seed","status","last_step","at_step","at":{metric:v},"end":{…}}],
 *                   "metrics":{"<metric>":{"at":{summary},"end":{summary},"change":{summary + "p"}}}}],
 *      "answer":[sentences]}; a summary is {"n","mean","std","ci":[lo,hi],"reason"}.
 * at 0: SVC_QUESTIONS_DEFAULT_AT, or a fifth of the longest run's steps when no run has more.
 * SVC_NOT_FOUND (field "id"), SVC_INVALID (at < 0, conf outside (0,1)), SVC_FAILED; *out NULL then. */
svc_status svc_questions_head_spread(struct app *a, long long exp_id, long at, double conf, json_t **out,
                                     svc_error *err);

/* Q2. {"experiment":{…}, "conf", "variants":[{"name","attention","corpus","task","buckets":[…],
 *      "runs":[{"id","replicate","seed","status","eval_step","acc":{key:v}}],
 *      "acc":{"acc":{summary},"acc.k4":{summary},…}}]}. Errors as above. */
svc_status svc_questions_accuracy(struct app *a, long long exp_id, double conf, json_t **out, svc_error *err);

#endif
