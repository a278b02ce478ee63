/* Statistics over replicate runs: summaries with Student-t intervals, paired comparisons, a seeded
 * bootstrap and per-step bands over replicate curves. Pure C on plain arrays: no HTTP, SQL or
 * JSON, no mutable state, every function reentrant (safe from any thread).
 *
 * Conventions
 * - A value that cannot be computed is NaN, never a made-up number; where a summary leaves fields
 *   NaN its `reason` says why in one English sentence (a static string, never freed).
 * - Standard deviations are sample ones (divisor n - 1).
 * - Intervals are two-sided at confidence `conf` in (0, 1), e.g. 0.95.
 * - The distribution functions accept any real df > 0, df = INFINITY meaning the normal limit.
 * - Functions that can fail return a stats_status; NaN/infinite inputs are refused
 *   (STATS_ERR_INVALID) except in stats_band, which leaves them out (see there). */
#ifndef ATTNLAB_STATS_H
#define ATTNLAB_STATS_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
    STATS_OK = 0,
    STATS_ERR_INVALID, /* a NULL pointer with n > 0, conf outside (0,1), a non-finite value, ... */
    STATS_ERR_NOMEM,   /* an allocation failed */
} stats_status;

/* Fewest values for which a summary gives an interval and a test (see stats_summary). */
#define STATS_MIN_INTERVAL_N 3
/* Resamples stats_bootstrap_* draws when asked for 0. */
#define STATS_BOOTSTRAP_DEFAULT 10000
/* Most resamples a bootstrap accepts (more is STATS_ERR_INVALID). */
#define STATS_BOOTSTRAP_MAX 10000000

/* The reasons a summary or bootstrap gives (compare by pointer or by text):
 *   NO_VALUES     "no values"
 *   NEEDS_2       "needs at least 2 replicates for a standard deviation"
 *   NEEDS_3       "needs at least 3 replicates for an interval"
 *   NO_VARIATION  "all values are equal: no t statistic" */
extern const char STATS_REASON_NO_VALUES[];
extern const char STATS_REASON_NEEDS_2[];
extern const char STATS_REASON_NEEDS_3[];
extern const char STATS_REASON_NO_VARIATION[];

/* ---- moments ----------------------------------------------------------------------------- */

/* Mean and sample standard deviation of x[0..n-1] by the corrected two-pass algorithm (mean first,
 * then sum of squared deviations minus the rounding correction (sum of deviations)^2 / n), so a
 * large common offset costs no precision. n = 0: both NaN; n = 1: mean = x[0], std NaN.
 * Either output may be NULL. Returns STATS_ERR_INVALID (outputs NaN) when x is NULL with n > 0 or
 * a value is not finite. */
stats_status stats_mean_std(const double *x, size_t n, double *mean, double *std);

/* ---- distributions ----------------------------------------------------------------------- */

/* The regularized incomplete beta function I_x(a, b) for a, b > 0 and 0 <= x <= 1, by the
 * continued fraction (modified Lentz), evaluated on whichever of x or 1 - x converges fast
 * (I_x(a,b) = 1 - I_{1-x}(b,a)); the prefactor x^a (1-x)^b / B(a,b) is formed from Stirling's
 * series when a or b is large. Relative accuracy about 1e-13, a little worse in tails near the
 * smallest doubles (measured against 40-digit references for 0.3 <= a, b <= 1e5: at most 2.4e-13,
 * at a value of 1e-268). The work grows like sqrt(max(a, b)). Returns NaN outside that domain
 * (also for infinite a or b). */
double stats_incbeta(double x, double a, double b);

/* P(T <= t) for Student's t with df degrees of freedom (any real df > 0; INFINITY: standard
 * normal). Whichever of the tail and the central part is the smaller is computed directly, so a
 * small tail probability keeps its relative accuracy (about 2e-13 or better for every df;
 * where df >= 2000 and t^2 < 0.025 df^(5/6) the Cornish-Fisher expansion, Abramowitz & Stegun
 * 26.7.5, is inverted instead of the continued fraction, which cancels there).
 * NaN for df <= 0 (or NaN) or NaN t; t = +-INFINITY gives 1 or 0. */
double stats_t_cdf(double t, double df);

/* Two-sided p-value P(|T| >= |t|) = I_{df/(df+t^2)}(df/2, 1/2), same accuracy and NaNs as
 * stats_t_cdf; t = 0 gives exactly 1. */
double stats_t_p_two_sided(double t, double df);

/* The quantile (inverse CDF): the t with P(T <= t) = p, for 0 < p < 1 and df > 0 (INFINITY:
 * normal). Solved by Newton's method kept inside a bracket, falling back to bisection
 * (geometric while the bracket spans orders of magnitude), on the central probability 2p - 1
 * near the centre and on the tail beyond, so neither end loses digits; relative accuracy about
 * 1e-13. p = 0 or 1 gives -INFINITY or INFINITY, p = 1/2 gives 0; NaN outside [0, 1] or for
 * df <= 0. */
double stats_t_quantile(double p, double df);

/* ---- summaries and tests ----------------------------------------------------------------- */

typedef struct {
    size_t n;
    double mean;         /* NaN when n = 0 */
    double std;          /* sample std; NaN when n < 2 */
    double sem;          /* std / sqrt(n); NaN when n < 2 */
    double df;           /* n - 1 */
    double ci_lo, ci_hi; /* mean -+ t_{(1+conf)/2, n-1} * sem; NaN when n < STATS_MIN_INTERVAL_N */
    double t, p;         /* t = mean / sem against 0, two-sided p-value; NaN when n < 3 or std = 0 */
    const char *reason;  /* NULL when every field above is a number; else why some are NaN */
} stats_summary;

/* One-sample summary of x[0..n-1] with a conf-level t interval and a t-test of mean = 0.
 * n < 3 is not an error: the fields that need more values are NaN and `reason` is
 * STATS_REASON_NO_VALUES (n = 0), STATS_REASON_NEEDS_2 (n = 1) or STATS_REASON_NEEDS_3 (n = 2).
 * When all values are equal (std = 0) the interval is [mean, mean], t and p are NaN and reason is
 * STATS_REASON_NO_VARIATION. Returns STATS_ERR_INVALID (and *out all NaN, reason NULL) for a NULL
 * out, x NULL with n > 0, conf outside (0, 1) or a non-finite value. */
stats_status stats_summarize(const double *x, size_t n, double conf, stats_summary *out);

/* Paired comparison: stats_summarize of the differences d_i = a[i] - b[i] (the pairs match by
 * index, e.g. by seed), so `mean` is the paired mean difference, [ci_lo, ci_hi] its t interval and
 * p the paired t-test's two-sided p-value. Allocates nothing; errors as stats_summarize. */
stats_status stats_paired(const double *a, const double *b, size_t n, double conf, stats_summary *out);

/* ---- bootstrap --------------------------------------------------------------------------- */

/* Percentile bootstrap interval of the mean of x[0..n-1]: draws `resamples` samples of size n with
 * replacement (0: STATS_BOOTSTRAP_DEFAULT), takes their means, and returns the (1-conf)/2 and
 * (1+conf)/2 quantiles of those means (linear interpolation between order statistics, as R's
 * type 7); O(resamples * n) time. Deterministic: the same data in the same order, conf, resamples
 * and seed give the same bits on every platform (the generator is the engine's xoshiro256** seeded
 * by splitmix64, server/engine/rng.h; indices are drawn without modulo bias). n <
 * STATS_MIN_INTERVAL_N is not an error: *lo = *hi = NaN and *reason (if non-NULL) is set as in
 * stats_summarize; otherwise *reason = NULL. Returns STATS_ERR_INVALID (lo, hi NaN) for NULL lo/hi,
 * x NULL with n > 0, conf outside (0,1), resamples > STATS_BOOTSTRAP_MAX or a non-finite value;
 * STATS_ERR_NOMEM when the resample means cannot be allocated. */
stats_status stats_bootstrap_mean_ci(const double *x, size_t n, double conf, size_t resamples, uint64_t seed,
                                     double *lo, double *hi, const char **reason);

/* The same for the mean of paired differences a[i] - b[i] (pairs resampled together): the
 * bootstrap counterpart of stats_paired's interval. */
stats_status stats_bootstrap_paired_ci(const double *a, const double *b, size_t n, double conf, size_t resamples,
                                       uint64_t seed, double *lo, double *hi, const char **reason);

/* ---- intervals that respect a metric's bounds --------------------------------------------- */

typedef enum {
    STATS_CI_T = 0,     /* Student's t interval of the mean (stats_summarize) */
    STATS_CI_BOOTSTRAP, /* percentile bootstrap interval of the mean (stats_bootstrap_mean_ci) */
} stats_ci_method;

/* "t" or "bootstrap" (the names the API gives). */
const char *stats_ci_method_name(stats_ci_method m);

/* A conf interval of the mean of x[0..n-1], values of a metric that cannot leave [lower, upper]
 * (-INFINITY / INFINITY: no bound on that side; e.g. [0, 1] for an accuracy, [0, INFINITY) for a
 * spread). With `prefer` STATS_CI_BOOTSTRAP it is the percentile bootstrap interval (resamples,
 * seed as stats_bootstrap_mean_ci), which lies within [min x, max x] and so within the bounds. With
 * STATS_CI_T it is the t interval of stats_summarize when that lies within the bounds, else the
 * bootstrap one: a t interval never reaches past a bound the values cannot cross. *used (if
 * non-NULL) gets the method of the interval returned (`prefer` when there is none). The values
 * are not checked against the bounds (a value that rounding put past one is no error): the
 * interval returned is clamped to them. n < STATS_MIN_INTERVAL_N gives NaN as stats_summarize
 * does. Errors as stats_bootstrap_mean_ci, and STATS_ERR_INVALID for a NaN bound or lower > upper. */
stats_status stats_bounded_ci(const double *x, size_t n, double conf, double lower, double upper,
                              stats_ci_method prefer, size_t resamples, uint64_t seed, double *lo, double *hi,
                              stats_ci_method *used);

/* The Wilson score interval (Wilson 1927; Newcombe 1998's method 3) of a binomial proportion,
 * `successes` out of `n` trials, at confidence conf: (p + z^2/2n -+ z sqrt(p(1-p)/n + z^2/4n^2)) /
 * (1 + z^2/n), z the normal (1 + conf)/2 quantile. It lies in [0, 1] (exactly 0 below for no
 * successes, exactly 1 above for all). STATS_ERR_INVALID (lo, hi NaN) for n < 1, successes outside
 * 0..n, conf outside (0, 1) or NULL lo/hi. */
stats_status stats_wilson(long successes, long n, double conf, double *lo, double *hi);

/* ---- bands over replicate curves --------------------------------------------------------- */

typedef struct {
    int64_t step;
    double value;
} stats_point;

typedef struct {
    const stats_point *points; /* any order; at most one point per step */
    size_t n;
} stats_series;

typedef struct {
    int64_t step;
    size_t n;        /* replicates with a finite value at this step */
    double mean;     /* NaN when n = 0 */
    double std;      /* sample std; NaN when n < 2 */
    double min, max; /* NaN when n = 0 */
} stats_band_point;

/* Per-step band over n_reps replicate series: one stats_band_point for every step present in at
 * least one replicate, in ascending step order, with n, mean, std, min and max over the replicates
 * that have that step (replicates missing a step, e.g. shorter runs, are simply not counted).
 * Non-finite values (a diverged run's NaN loss) are left out of their step's statistics, but the
 * step is still listed (with n = 0 when nothing finite remains). On STATS_OK *out is a malloc'd
 * array of *n_out points (NULL when there are none) for the caller to free(). Returns
 * STATS_ERR_INVALID (*out NULL, *n_out 0) for NULL out/n_out, reps NULL with n_reps > 0, a series
 * with points NULL and n > 0, or a step twice in one replicate; STATS_ERR_NOMEM when an
 * allocation fails. */
stats_status stats_band(const stats_series *reps, size_t n_reps, stats_band_point **out, size_t *n_out);

#endif
