/* Statistics over replicates; the contract is in stats.h. */
#include "services/stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/rng.h"

const char STATS_REASON_NO_VALUES[] = "no values";
const char STATS_REASON_NEEDS_2[] = "needs at least 2 replicates for a standard deviation";
const char STATS_REASON_NEEDS_3[] = "needs at least 3 replicates for an interval";
const char STATS_REASON_NO_VARIATION[] = "all values are equal: no t statistic";

/* ---- moments ----------------------------------------------------------------------------- */

/* The i-th value of a one-sample (b NULL) or paired (a - b) data set. */
static inline double value_at(const double *a, const double *b, size_t i) { return b ? a[i] - b[i] : a[i]; }

static int all_finite(const double *a, const double *b, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(a[i]) || (b && !isfinite(b[i])) || !isfinite(value_at(a, b, i))) return 0;
    return 1;
}

/* Corrected two-pass mean and sample std of finite values (n >= 1); *constant tells whether all
 * values are equal, in which case std is exactly 0 (n >= 2). */
static void moments(const double *a, const double *b, size_t n, double *mean, double *std, int *constant) {
    double sum = 0.0, first = value_at(a, b, 0);
    int same = 1;
    for (size_t i = 0; i < n; i++) {
        double v = value_at(a, b, i);
        sum += v;
        if (v != first) same = 0;
    }
    double m = sum / (double)n;
    if (!isfinite(m)) { /* the sum overflowed: a running mean cannot */
        m = 0.0;
        for (size_t i = 0; i < n; i++) m += (value_at(a, b, i) - m) / (double)(i + 1);
    }
    if (same) m = first;
    double ss = 0.0, c = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = value_at(a, b, i) - m;
        ss += d * d;
        c += d;
    }
    if (!same) m += c / (double)n; /* the first pass's rounding, corrected */
    *mean = m;
    if (n < 2) {
        *std = NAN;
    } else if (same) {
        *std = 0.0;
    } else {
        double var = (ss - c * c / (double)n) / (double)(n - 1);
        *std = sqrt(var > 0.0 ? var : 0.0);
    }
    *constant = same;
}

stats_status stats_mean_std(const double *x, size_t n, double *mean, double *std) {
    if (mean) *mean = NAN;
    if (std) *std = NAN;
    if (n > 0 && (!x || !all_finite(x, NULL, n))) return STATS_ERR_INVALID;
    if (n == 0) return STATS_OK;
    double m, s;
    int constant;
    moments(x, NULL, n, &m, &s, &constant);
    if (mean) *mean = m;
    if (std) *std = s;
    return STATS_OK;
}

/* ---- special functions ------------------------------------------------------------------- */

static double lgam(double x) {
    int sign;
    return lgamma_r(x, &sign); /* reentrant, unlike lgamma (signgam) */
}

/* Stirling's series remainder: lgamma(z) - ((z - 1/2) ln z - z + ln(2 pi)/2), for z >= 20
 * (the first omitted term is below 1e-17 there). */
static double stirling_corr(double z) {
    double r = 1.0 / z, r2 = r * r;
    return r * (1.0 / 12 - r2 * (1.0 / 360 - r2 * (1.0 / 1260 - r2 * (1.0 / 1680 - r2 / 1188))));
}

/* ln B(a, b). For a large argument, lgamma(a) - lgamma(a + b) is formed from Stirling's series so
 * that two huge logarithms are not subtracted (which would cost about log10(a ln a) digits). */
static double lbeta(double a, double b) {
    if (a < b) {
        double t = a;
        a = b;
        b = t;
    } /* now a >= b */
    if (a < 20.0) return lgam(a) + lgam(b) - lgam(a + b);
    /* lgamma(a) - lgamma(a+b) = -(a - 1/2) ln(1 + b/a) - b ln(a + b) + b + corr(a) - corr(a+b) */
    double diff = -(a - 0.5) * log1p(b / a) - b * log(a + b) + b + stirling_corr(a) - stirling_corr(a + b);
    if (b >= 20.0) { /* both large: lgamma(b) by the same series */
        double lgb = (b - 0.5) * log(b) - b + 0.91893853320467274178 + stirling_corr(b);
        return lgb + diff;
    }
    return lgam(b) + diff;
}

/* Continued fraction of I_x(a, b) (Numerical Recipes' betacf), evaluated by the modified Lentz
 * method. Converges fast for x < (a + 1) / (a + b + 2). NaN if it does not converge. */
static double betacf(double a, double b, double x) {
    const double tiny = 1e-300, eps = 1e-15;
    const int maxit = 2000000;
    double qab = a + b, qap = a + 1.0, qam = a - 1.0;
    double c = 1.0, d = 1.0 - qab * x / qap;
    if (fabs(d) < tiny) d = tiny;
    d = 1.0 / d;
    double h = d;
    for (int m = 1; m <= maxit; m++) {
        double m2 = 2.0 * m;
        double aa = m * (b - m) * x / ((qam + m2) * (a + m2));
        d = 1.0 + aa * d;
        if (fabs(d) < tiny) d = tiny;
        c = 1.0 + aa / c;
        if (fabs(c) < tiny) c = tiny;
        d = 1.0 / d;
        h *= d * c;
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
        d = 1.0 + aa * d;
        if (fabs(d) < tiny) d = tiny;
        c = 1.0 + aa / c;
        if (fabs(c) < tiny) c = tiny;
        d = 1.0 / d;
        double del = d * c;
        h *= del;
        if (fabs(del - 1.0) < eps) return h;
    }
    return NAN;
}

/* log(1 + d) - d for d > -1 without cancellation: for |d| <= 1/2, with r = d / (2 + d),
 * log(1 + d) = 2 atanh(r) and d - 2r = d r give -d r + 2 r^3 (1/3 + r^2/5 + r^4/7 + ...). */
static double log1pmx(double d) {
    if (fabs(d) > 0.5) return log1p(d) - d;
    double r = d / (2.0 + d), r2 = r * r, sum = 0.0, pw = 1.0;
    for (int k = 0; k < 40; k++) {
        double term = pw / (2 * k + 3);
        sum += term;
        if (term < 1e-17 * sum) break;
        pw *= r2;
    }
    return -d * r + 2.0 * r * r2 * sum;
}

/* ln(x^a y^b / B(a, b)). When a and b are both large the direct sum a ln x + b ln y - ln B
 * subtracts numbers of size (a + b) ln 2; instead, with Stirling's series and x0 = a/(a+b),
 * y0 = b/(a+b), it equals a ln(x/x0) + b ln(y/y0) + ln(ab/(a+b))/2 - ln(2 pi)/2 -
 * (corr(a) + corr(b) - corr(a+b)). Near the peak (x/x0 and y/y0 within 1/2 of 1) the first two
 * terms are written a l(dx/x0) + b l(-dx/y0), dx = x - x0, l(d) = log(1+d) - d, whose first-order
 * parts cancel exactly; away from it ln(x/x0) = ln x + ln(1 + b/a) keeps the digits of ln x
 * (ln of the rounded a/(a+b) would cost a * eps). */
static double lfront_beta(double x, double y, double lx, double ly, double a, double b) {
    if (a < 20.0 || b < 20.0) return a * lx + b * ly - lbeta(a, b);
    double s = a + b, x0 = a / s, y0 = b / s;
    double dx = x <= 0.5 ? x - x0 : y0 - y; /* whichever of x, y is the more accurate */
    double da = dx / x0, db = -dx / y0, main;
    if (fabs(da) <= 0.5 && fabs(db) <= 0.5)
        main = a * log1pmx(da) + b * log1pmx(db);
    else
        main = a * (lx + log1p(b / a)) + b * (ly + log1p(a / b)); /* ln x0 = -ln(1 + b/a) */
    return main + 0.5 * log(a * b / s) - 0.91893853320467274178 -
           (stirling_corr(a) + stirling_corr(b) - stirling_corr(s));
}

/* I_x(a, b) given x, y = 1 - x and their logarithms lx, ly, each computed without cancellation
 * by the caller (x or y may have underflowed to 0 while its logarithm is still finite). */
static double incbeta_xy(double x, double y, double lx, double ly, double a, double b) {
    if (lx == -INFINITY) return 0.0;
    if (ly == -INFINITY) return 1.0;
    double lfront = lfront_beta(x, y, lx, ly, a, b);
    /* in the branch taken the fraction is at most about a + b + 2: a front below e^-760 then
     * leaves nothing a double can hold, and the fraction need not be run */
    int tiny = lfront + log(a + b + 2.0) < -760.0;
    if (x < (a + 1.0) / (a + b + 2.0)) return tiny ? 0.0 : exp(lfront) * betacf(a, b, x) / a;
    return tiny ? 1.0 : 1.0 - exp(lfront) * betacf(b, a, y) / b;
}

double stats_incbeta(double x, double a, double b) {
    if (!(a > 0.0) || !(b > 0.0) || !(x >= 0.0) || !(x <= 1.0) || isinf(a) || isinf(b)) return NAN;
    return incbeta_xy(x, 1.0 - x, log(x), log1p(-x), a, b);
}

/* ---- Student's t ------------------------------------------------------------------------- */

/* Large df: the Cornish-Fisher expansion of the t quantile in the normal one (Abramowitz &
 * Stegun 26.7.5, four terms), t = z + g1(z)/df + ... + g4(z)/df^4, inverted for z. The continued
 * fraction's recurrence cancels when df is large and t^2/df small, keeping only about
 * eps * df / t^2 of relative accuracy, while the expansion's first omitted term, about
 * 4e-4 z^12 / df^5 relative (measured: the 4-term error times df^5 is constant, 0.74 at z = 1.96),
 * is small exactly there. So the expansion is used where df >= CF_DF and
 * t^2 < 0.025 df^(5/6), the region where its error is below 1e-13; outside it the continued
 * fraction's relative error stays below about 2e-13 (and beyond df ~ 1.5e5 that outside region
 * has tails below the smallest double, which the fraction is not even run for). */
#define CF_DF 2000.0

static double cf_t(double z, double df, double *dt_dz) {
    double z2 = z * z, r = 1.0 / df;
    double g1 = z * (z2 + 1.0) / 4.0;
    double g2 = z * (3.0 + z2 * (16.0 + z2 * 5.0)) / 96.0;
    double g3 = z * (-15.0 + z2 * (17.0 + z2 * (19.0 + z2 * 3.0))) / 384.0;
    double g4 = z * (-945.0 + z2 * (-1920.0 + z2 * (1482.0 + z2 * (776.0 + z2 * 79.0)))) / 92160.0;
    double d1 = (1.0 + 3.0 * z2) / 4.0;
    double d2 = (3.0 + z2 * (48.0 + z2 * 25.0)) / 96.0;
    double d3 = (-15.0 + z2 * (51.0 + z2 * (95.0 + z2 * 21.0))) / 384.0;
    double d4 = (-945.0 + z2 * (-5760.0 + z2 * (7410.0 + z2 * (5432.0 + z2 * 711.0)))) / 92160.0;
    *dt_dz = 1.0 + r * (d1 + r * (d2 + r * (d3 + r * d4)));
    return z + r * (g1 + r * (g2 + r * (g3 + r * g4)));
}

/* The z >= 0 with cf_t(z) = t (t >= 0), by Newton's method from z = t (cf_t is increasing and
 * convex there, so the iterates fall monotonically onto the root). */
static double cf_z(double t, double df) {
    double z = t;
    for (int it = 0; it < 60; it++) {
        double d, f = cf_t(z, df, &d) - t, zn = z - f / d;
        if (!(zn >= 0.0)) zn = 0.5 * z;
        if (fabs(zn - z) <= 1e-16 * zn) return zn;
        z = zn;
    }
    return z;
}

/* For t >= 0: *tail = P(|T| >= t) and *central = P(|T| < t), which add up to 1; whichever is
 * the smaller is computed directly, so both keep their relative accuracy. With u = t/sqrt(df):
 * P(|T| >= t) = I_x(df/2, 1/2) with x = 1/(1+u^2), and P(|T| < t) = I_{1-x}(1/2, df/2);
 * x, 1 - x and their logarithms are formed so that neither u^2 overflowing nor x near 1 loses
 * digits. */
static void t_parts(double t, double df, double *tail, double *central) {
    if (t == 0.0) {
        *tail = 1.0;
        *central = 0.0;
        return;
    }
    if (isinf(t)) {
        *tail = 0.0;
        *central = 1.0;
        return;
    }
    double u = t / sqrt(df);
    if (isinf(df) || (df >= CF_DF && t * t < 0.025 * pow(df, 5.0 / 6.0))) {
        double z = isinf(df) ? t : cf_z(t, df), s = z * 0.70710678118654752440;
        *tail = erfc(s);
        *central = erf(s);
        return;
    }
    double x, y, lx, ly;
    if (u <= 1.0) {
        double u2 = u * u, l1p = log1p(u2);
        x = 1.0 / (1.0 + u2);
        y = u2 / (1.0 + u2);
        lx = -l1p;
        ly = 2.0 * log(u) - l1p;
    } else {
        double w = 1.0 / u, w2 = w * w, l1p = log1p(w2); /* w2 may underflow; lx stays finite */
        x = w2 / (1.0 + w2);
        y = 1.0 / (1.0 + w2);
        lx = 2.0 * log(w) - l1p;
        ly = -l1p;
    }
    double a = 0.5 * df;
    if (x < (a + 1.0) / (a + 2.5)) { /* the tail is the directly computed side */
        *tail = incbeta_xy(x, y, lx, ly, a, 0.5);
        *central = 1.0 - *tail;
    } else {
        *central = incbeta_xy(y, x, ly, lx, 0.5, a);
        *tail = 1.0 - *central;
    }
}

/* The density of t (df finite) or of the standard normal (df infinite). */
static double t_pdf(double t, double df) {
    if (isinf(df)) return 0.39894228040143267794 * exp(-0.5 * t * t);
    double u = fabs(t) / sqrt(df);
    double l1p = u <= 1.0 ? log1p(u * u) : 2.0 * log(u) + log1p(1.0 / (u * u));
    return exp(-lbeta(0.5 * df, 0.5) - 0.5 * log(df) - 0.5 * (df + 1.0) * l1p);
}

double stats_t_cdf(double t, double df) {
    if (isnan(t) || !(df > 0.0)) return NAN;
    double tail, central;
    t_parts(fabs(t), df, &tail, &central);
    return t < 0.0 ? 0.5 * tail : 0.5 + 0.5 * central;
}

double stats_t_p_two_sided(double t, double df) {
    if (isnan(t) || !(df > 0.0)) return NAN;
    double tail, central;
    t_parts(fabs(t), df, &tail, &central);
    return tail;
}

/* Starting point: Abramowitz & Stegun 26.2.23 for the normal upper-tail quantile
 * (|error| < 4.5e-4), then the first two terms of the Cornish-Fisher expansion of t. */
static double t_start(double q, double df) {
    double s = sqrt(-2.0 * log(q));
    double z = s - (2.515517 + s * (0.802853 + s * 0.010328)) / (1.0 + s * (1.432788 + s * (0.189269 + s * 0.001308)));
    if (isinf(df)) return z;
    double z2 = z * z;
    double t = z + z * (z2 + 1.0) / (4.0 * df) + z * (5.0 * z2 * z2 + 16.0 * z2 + 3.0) / (96.0 * df * df);
    return isfinite(t) && t > 0.0 ? t : 1.0;
}

/* The t > 0 with P(T >= t) = q, given q in (0, 1/2) and c = 1 - 2q, both exact. The equation is
 * solved on the central probability P(|T| < t) = c while that is the smaller side (q > 1/4) and
 * on the tail P(|T| >= t) = 2q beyond, so the target never carries rounding from 1 - x. The
 * function f(t) = tail(t)/2 - q is decreasing and convex on t > 0, so Newton's iterates from the
 * left of the root rise monotonically; a step leaving the bracket [lo, hi] is replaced by
 * bisection (geometric while hi/lo > 4), and an unknown hi is found by doubling. */
static double t_upper_inverse(double q, double c, double df) {
    double lo = 0.0, hi = INFINITY, t = t_start(q, df);
    int on_central = q > 0.25;
    for (int it = 0; it < 3000; it++) {
        double tail, central;
        t_parts(t, df, &tail, &central);
        double f = on_central ? 0.5 * (c - central) : 0.5 * tail - q;
        if (f == 0.0) return t;
        if (f > 0.0)
            lo = t;
        else
            hi = t;
        double pdf = t_pdf(t, df);
        double tn = pdf > 0.0 ? t + f / pdf : NAN;
        if (!(tn > lo && tn < hi)) { /* also NaN */
            if (isinf(hi))
                tn = 2.0 * (t > 1.0 ? t : 1.0);
            else if (lo > 0.0 && hi > 4.0 * lo)
                tn = sqrt(lo * hi);
            else
                tn = 0.5 * (lo + hi);
        }
        if (fabs(tn - t) <= 2e-15 * tn) return tn;
        if (isfinite(hi) && hi - lo <= 4e-16 * hi) return 0.5 * (lo + hi);
        t = tn;
    }
    return t;
}

double stats_t_quantile(double p, double df) {
    if (!(p >= 0.0 && p <= 1.0) || !(df > 0.0)) return NAN;
    if (p == 0.0) return -INFINITY;
    if (p == 1.0) return INFINITY;
    if (p == 0.5) return 0.0;
    /* 1 - p and 2p - 1 are exact for p >= 1/2 (Sterbenz), p and 1 - 2p for 1/4 <= p < 1/2 */
    if (p > 0.5) return t_upper_inverse(1.0 - p, 2.0 * (p - 0.5), df);
    return -t_upper_inverse(p, 1.0 - 2.0 * p, df);
}

/* ---- summaries --------------------------------------------------------------------------- */

static void summary_nan(stats_summary *s, size_t n) {
    s->n = n;
    s->mean = s->std = s->sem = s->ci_lo = s->ci_hi = s->t = s->p = NAN;
    s->df = n > 0 ? (double)(n - 1) : NAN;
    s->reason = NULL;
}

static stats_status summarize(const double *a, const double *b, int paired, size_t n, double conf, stats_summary *out) {
    if (!out) return STATS_ERR_INVALID;
    summary_nan(out, n);
    if (!(conf > 0.0 && conf < 1.0)) return STATS_ERR_INVALID;
    if (n > 0 && (!a || (paired && !b) || !all_finite(a, b, n))) return STATS_ERR_INVALID;
    if (n == 0) {
        out->reason = STATS_REASON_NO_VALUES;
        return STATS_OK;
    }
    int constant;
    moments(a, b, n, &out->mean, &out->std, &constant);
    if (n < 2) {
        out->reason = STATS_REASON_NEEDS_2;
        return STATS_OK;
    }
    out->sem = out->std / sqrt((double)n);
    if (n < STATS_MIN_INTERVAL_N) {
        out->reason = STATS_REASON_NEEDS_3;
        return STATS_OK;
    }
    double tc = stats_t_quantile(0.5 * (1.0 + conf), out->df);
    out->ci_lo = out->mean - tc * out->sem;
    out->ci_hi = out->mean + tc * out->sem;
    if (constant) {
        out->ci_lo = out->ci_hi = out->mean;
        out->reason = STATS_REASON_NO_VARIATION;
        return STATS_OK;
    }
    out->t = out->mean / out->sem;
    out->p = stats_t_p_two_sided(out->t, out->df);
    return STATS_OK;
}

stats_status stats_summarize(const double *x, size_t n, double conf, stats_summary *out) {
    return summarize(x, NULL, 0, n, conf, out);
}

stats_status stats_paired(const double *a, const double *b, size_t n, double conf, stats_summary *out) {
    return summarize(a, b, 1, n, conf, out);
}

/* ---- bootstrap --------------------------------------------------------------------------- */

/* A uniform integer in [0, n), n >= 1, by rejection: no modulo bias. */
static uint64_t uniform_below(rng_state *r, uint64_t n) {
    uint64_t limit = UINT64_MAX - UINT64_MAX % n; /* the largest multiple of n below 2^64 */
    for (;;) {
        uint64_t x = rng_next_u64(r);
        if (x < limit) return x % n;
    }
}

static int cmp_double(const void *pa, const void *pb) {
    double a = *(const double *)pa, b = *(const double *)pb;
    return (a > b) - (a < b);
}

/* Quantile of sorted v[0..n-1] at probability q, linear between order statistics (R type 7). */
static double quantile_sorted(const double *v, size_t n, double q) {
    double h = (double)(n - 1) * q;
    size_t i = (size_t)floor(h);
    if (i >= n - 1) return v[n - 1];
    return v[i] + (h - (double)i) * (v[i + 1] - v[i]);
}

static stats_status bootstrap(const double *a, const double *b, int paired, size_t n, double conf, size_t resamples,
                              uint64_t seed, double *lo, double *hi, const char **reason) {
    if (reason) *reason = NULL;
    if (lo) *lo = NAN;
    if (hi) *hi = NAN;
    if (!lo || !hi || !(conf > 0.0 && conf < 1.0) || resamples > STATS_BOOTSTRAP_MAX) return STATS_ERR_INVALID;
    if (n > 0 && (!a || (paired && !b) || !all_finite(a, b, n))) return STATS_ERR_INVALID;
    if (n < STATS_MIN_INTERVAL_N) {
        if (reason) *reason = n == 0 ? STATS_REASON_NO_VALUES : n == 1 ? STATS_REASON_NEEDS_2 : STATS_REASON_NEEDS_3;
        return STATS_OK;
    }
    if (resamples == 0) resamples = STATS_BOOTSTRAP_DEFAULT;
    double *means = malloc(resamples * sizeof *means);
    if (!means) return STATS_ERR_NOMEM;
    rng_state r;
    rng_seed(&r, seed);
    for (size_t k = 0; k < resamples; k++) {
        double sum = 0.0;
        for (size_t i = 0; i < n; i++) sum += value_at(a, b, (size_t)uniform_below(&r, n));
        means[k] = sum / (double)n;
    }
    qsort(means, resamples, sizeof *means, cmp_double);
    *lo = quantile_sorted(means, resamples, 0.5 * (1.0 - conf));
    *hi = quantile_sorted(means, resamples, 0.5 * (1.0 + conf));
    free(means);
    return STATS_OK;
}

stats_status stats_bootstrap_mean_ci(const double *x, size_t n, double conf, size_t resamples, uint64_t seed,
                                     double *lo, double *hi, const char **reason) {
    return bootstrap(x, NULL, 0, n, conf, resamples, seed, lo, hi, reason);
}

stats_status stats_bootstrap_paired_ci(const double *a, const double *b, size_t n, double conf, size_t resamples,
                                       uint64_t seed, double *lo, double *hi, const char **reason) {
    return bootstrap(a, b, 1, n, conf, resamples, seed, lo, hi, reason);
}

/* ---- bounded intervals ------------------------------------------------------------------- */

const char *stats_ci_method_name(stats_ci_method m) { return m == STATS_CI_BOOTSTRAP ? "bootstrap" : "t"; }

stats_status stats_bounded_ci(const double *x, size_t n, double conf, double lower, double upper,
                              stats_ci_method prefer, size_t resamples, uint64_t seed, double *lo, double *hi,
                              stats_ci_method *used) {
    if (used) *used = prefer;
    if (lo) *lo = NAN;
    if (hi) *hi = NAN;
    if (!lo || !hi || isnan(lower) || isnan(upper) || lower > upper) return STATS_ERR_INVALID;
    if (n > 0 && !x) return STATS_ERR_INVALID;
    if (prefer == STATS_CI_T) {
        stats_summary s;
        stats_status st = stats_summarize(x, n, conf, &s);
        if (st != STATS_OK) return st;
        if (!isfinite(s.ci_lo) || (s.ci_lo >= lower && s.ci_hi <= upper)) {
            *lo = s.ci_lo;
            *hi = s.ci_hi;
            return STATS_OK;
        }
    }
    if (used) *used = STATS_CI_BOOTSTRAP;
    stats_status st = stats_bootstrap_mean_ci(x, n, conf, resamples, seed, lo, hi, NULL);
    if (st == STATS_OK && isfinite(*lo)) { /* within [min x, max x]: only rounding or stray values reach out */
        *lo = fmin(fmax(*lo, lower), upper);
        *hi = fmin(fmax(*hi, lower), upper);
    }
    return st;
}

stats_status stats_wilson(long successes, long n, double conf, double *lo, double *hi) {
    if (lo) *lo = NAN;
    if (hi) *hi = NAN;
    if (!lo || !hi || n < 1 || successes < 0 || successes > n || !(conf > 0.0 && conf < 1.0)) return STATS_ERR_INVALID;
    double z = stats_t_quantile(0.5 * (1.0 + conf), INFINITY), z2 = z * z, nn = (double)n;
    double p = (double)successes / nn, denom = 1.0 + z2 / nn;
    double centre = (p + z2 / (2.0 * nn)) / denom;
    double half = z * sqrt(p * (1.0 - p) / nn + z2 / (4.0 * nn * nn)) / denom;
    *lo = successes == 0 ? 0.0 : fmax(0.0, centre - half);
    *hi = successes == n ? 1.0 : fmin(1.0, centre + half);
    return STATS_OK;
}

/* ---- bands ------------------------------------------------------------------------------- */

typedef struct {
    int64_t step;
    size_t rep;
    double value;
} band_entry;

static int cmp_entry(const void *pa, const void *pb) {
    const band_entry *a = pa, *b = pb;
    if (a->step != b->step) return a->step < b->step ? -1 : 1;
    return (a->rep > b->rep) - (a->rep < b->rep);
}

stats_status stats_band(const stats_series *reps, size_t n_reps, stats_band_point **out, size_t *n_out) {
    if (out) *out = NULL;
    if (n_out) *n_out = 0;
    if (!out || !n_out || (n_reps > 0 && !reps)) return STATS_ERR_INVALID;
    size_t total = 0;
    for (size_t r = 0; r < n_reps; r++) {
        if (reps[r].n > 0 && !reps[r].points) return STATS_ERR_INVALID;
        if (reps[r].n > SIZE_MAX / sizeof(band_entry) - total) return STATS_ERR_NOMEM;
        total += reps[r].n;
    }
    if (total == 0) return STATS_OK;
    band_entry *e = malloc(total * sizeof *e);
    double *vals = malloc(n_reps * sizeof *vals);
    if (!e || !vals) {
        free(e);
        free(vals);
        return STATS_ERR_NOMEM;
    }
    size_t k = 0;
    for (size_t r = 0; r < n_reps; r++)
        for (size_t i = 0; i < reps[r].n; i++)
            e[k++] = (band_entry){reps[r].points[i].step, r, reps[r].points[i].value};
    qsort(e, total, sizeof *e, cmp_entry);
    size_t n_steps = 0;
    for (size_t i = 0; i < total; i++) {
        if (i > 0 && e[i].step == e[i - 1].step && e[i].rep == e[i - 1].rep) {
            free(e);
            free(vals);
            return STATS_ERR_INVALID; /* a step twice in one replicate */
        }
        if (i == 0 || e[i].step != e[i - 1].step) n_steps++;
    }
    stats_band_point *bp = malloc(n_steps * sizeof *bp);
    if (!bp) {
        free(e);
        free(vals);
        return STATS_ERR_NOMEM;
    }
    size_t j = 0;
    for (size_t i = 0; i < total;) {
        size_t end = i, m = 0;
        while (end < total && e[end].step == e[i].step) {
            if (isfinite(e[end].value)) vals[m++] = e[end].value;
            end++;
        }
        stats_band_point *p = &bp[j++];
        p->step = e[i].step;
        p->n = m;
        p->mean = p->std = p->min = p->max = NAN;
        if (m > 0) {
            int constant;
            moments(vals, NULL, m, &p->mean, &p->std, &constant);
            p->min = p->max = vals[0];
            for (size_t q = 1; q < m; q++) {
                if (vals[q] < p->min) p->min = vals[q];
                if (vals[q] > p->max) p->max = vals[q];
            }
        }
        i = end;
    }
    free(e);
    free(vals);
    *out = bp;
    *n_out = n_steps;
    return STATS_OK;
}
