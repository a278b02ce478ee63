/* The statistics core (server/stats.h) against published table values and closed forms:
 * Student-t critical values (NIST/SEMATECH e-Handbook, table 1.3.6.7.2), the exact quantiles of
 * t with 1, 2 and 4 degrees of freedom, the Cornish-Fisher expansion for large df (Abramowitz &
 * Stegun 26.7.5), closed forms of the incomplete beta function and of the t CDF, Student's 1908
 * sleep data, and hand-computed bands. The bootstrap is checked for determinism and against the
 * closed-form standard error of the bootstrap distribution of a mean. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../support/test.h"
#include "services/stats.h"

#define REL_NEAR(a, b, rel) CHECK_NEAR((a), (b), (rel)*fabs((double)(b)))

/* ---- t quantiles ------------------------------------------------------------------------- */

TEST(t_quantile_matches_the_published_table) {
    /* NIST/SEMATECH e-Handbook of Statistical Methods, 1.3.6.7.2, upper critical values of
     * Student's t, printed to 3 decimals (so |error| <= 0.0005). Its entry 318.313 for df 1 at
     * 0.999 is left out: the exact value is tan(0.499 pi) = 318.309 (checked in the next test). */
    static const struct {
        double df, p, t;
    } tab[] = {
        {1, 0.975, 12.706},       {2, 0.975, 4.303},        {4, 0.975, 2.776},        {9, 0.975, 2.262},
        {29, 0.975, 2.045},       {120, 0.975, 1.980},      {INFINITY, 0.975, 1.960}, {1, 0.90, 3.078},
        {1, 0.95, 6.314},         {1, 0.99, 31.821},        {1, 0.995, 63.657},       {3, 0.90, 1.638},
        {3, 0.95, 2.353},         {3, 0.975, 3.182},        {3, 0.99, 4.541},         {3, 0.995, 5.841},
        {3, 0.999, 10.215},       {10, 0.90, 1.372},        {10, 0.95, 1.812},        {10, 0.975, 2.228},
        {10, 0.99, 2.764},        {10, 0.995, 3.169},       {10, 0.999, 4.144},       {100, 0.90, 1.290},
        {100, 0.95, 1.660},       {100, 0.975, 1.984},      {100, 0.99, 2.364},       {100, 0.995, 2.626},
        {100, 0.999, 3.174},      {INFINITY, 0.90, 1.282},  {INFINITY, 0.95, 1.645},  {INFINITY, 0.99, 2.326},
        {INFINITY, 0.995, 2.576}, {INFINITY, 0.999, 3.090},
    };
    for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++) {
        double q = stats_t_quantile(tab[i].p, tab[i].df);
        CHECK_MSG(fabs(q - tab[i].t) <= 0.0005 + 1e-12, "t_{%g,%g} = %.6f, table %.3f", tab[i].p, tab[i].df, q,
                  tab[i].t);
        /* the lower quantile is its mirror image */
        CHECK_NEAR(stats_t_quantile(1.0 - tab[i].p, tab[i].df), -q, 1e-12 * q);
    }
}

TEST(t_quantile_matches_closed_forms_for_1_2_and_4_df) {
    static const double ps[] = {0.5000001, 0.51,     0.6,       0.75, 0.9,   0.95, 0.975, 0.99,
                                0.999,     1 - 1e-6, 1 - 1e-10, 0.3,  0.025, 1e-3, 1e-8,  1e-12};
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++) {
        double p = ps[i], q = p > 0.5 ? 1 - p : p, sg = p > 0.5 ? 1 : -1; /* q exact */
        /* df 1 (Cauchy): tan(pi (p - 1/2)), near the tails written -+cot(pi q) to keep digits;
         * df 2: (2p - 1) / sqrt(2 p (1 - p)) */
        double t1 = q > 0.25 ? tan(M_PI * (p - 0.5)) : sg / tan(M_PI * q), t2 = (2 * p - 1) / sqrt(2 * p * (1 - p));
        REL_NEAR(stats_t_quantile(p, 1), t1, 1e-13);
        REL_NEAR(stats_t_quantile(p, 2), t2, 1e-13);
        /* df 4: sign(p - 1/2) 2 sqrt(c - 1), c = cos(acos(sqrt(a)) / 3) / sqrt(a), a = 4p(1-p);
         * c - 1 cancels near p = 1/2, so there the CDF's closed form is inverted instead:
         * F(t) - 1/2 = (3/8) (t / sqrt(w)) (1 - t^2 / (12 w)), w = 1 + t^2/4 */
        double t4 = stats_t_quantile(p, 4);
        if (fabs(p - 0.5) > 0.05) {
            double al = 4 * q * (1 - q), c = cos(acos(sqrt(al)) / 3) / sqrt(al);
            REL_NEAR(t4, sg * 2 * sqrt(c - 1), 1e-12);
        }
        double w = 1 + t4 * t4 / 4, f = 0.375 * t4 / sqrt(w) * (1 - t4 * t4 / (12 * w));
        REL_NEAR(f, p - 0.5, 1e-13);
    }
}

TEST(t_quantile_follows_cornish_fisher_for_large_df) {
    /* Abramowitz & Stegun 26.7.5 with four correction terms; z are the normal quantiles
     * (0.975: 1.959963984540054, 0.995: 2.575829303548901, 0.95: 1.644853626951472). At df 120
     * the implementation goes through the incomplete beta function, so this is an independent
     * check (the omitted fifth term is about 1e-10 there); from df 2000 on it uses this expansion
     * itself near the centre, and the check pins its inversion (the finite-series test below
     * checks that region independently). */
    static const double P[] = {0.95, 0.975, 0.995};
    static const double Z[] = {1.644853626951472, 1.959963984540054, 2.575829303548901};
    static const double DF[] = {120, 1e4, 1e6, 1e9};
    for (int i = 0; i < 3; i++) {
        double z = Z[i], z2 = z * z, z3 = z2 * z, z5 = z3 * z2, z7 = z5 * z2, z9 = z7 * z2;
        double g1 = (z3 + z) / 4, g2 = (5 * z5 + 16 * z3 + 3 * z) / 96;
        double g3 = (3 * z7 + 19 * z5 + 17 * z3 - 15 * z) / 384;
        double g4 = (79 * z9 + 776 * z7 + 1482 * z5 - 1920 * z3 - 945 * z) / 92160;
        REL_NEAR(stats_t_quantile(P[i], INFINITY), z, 1e-14);
        for (int j = 0; j < 4; j++) {
            double n = DF[j];
            double cf = z + g1 / n + g2 / (n * n) + g3 / (n * n * n) + g4 / (n * n * n * n);
            REL_NEAR(stats_t_quantile(P[i], n), cf, n < 1000 ? 2e-9 : 1e-12);
        }
    }
}

TEST(t_quantile_edges) {
    CHECK(stats_t_quantile(0.5, 7) == 0.0);
    CHECK(isinf(stats_t_quantile(1.0, 3)) && stats_t_quantile(1.0, 3) > 0);
    CHECK(isinf(stats_t_quantile(0.0, 3)) && stats_t_quantile(0.0, 3) < 0);
    CHECK(isnan(stats_t_quantile(-0.1, 3)));
    CHECK(isnan(stats_t_quantile(1.1, 3)));
    CHECK(isnan(stats_t_quantile(NAN, 3)));
    CHECK(isnan(stats_t_quantile(0.9, 0)));
    CHECK(isnan(stats_t_quantile(0.9, -2)));
    CHECK(isnan(stats_t_quantile(0.9, NAN)));
    /* a far tail with 1 df: t = cot(pi q) ~ 1/(pi q) */
    REL_NEAR(stats_t_quantile(1e-300, 1), -1.0 / (M_PI * 1e-300), 1e-10);
}

TEST(t_quantile_inverts_the_cdf_for_fractional_df) {
    static const double DF[] = {0.3, 0.5, 1.5, 2.7, 7.25, 33.3, 450.5};
    static const double ps[] = {1e-9, 0.001, 0.05, 0.3, 0.7, 0.975, 0.999999};
    for (size_t i = 0; i < sizeof DF / sizeof DF[0]; i++)
        for (size_t j = 0; j < sizeof ps / sizeof ps[0]; j++) {
            double t = stats_t_quantile(ps[j], DF[i]);
            CHECK_MSG(isfinite(t), "df %g p %g", DF[i], ps[j]);
            double back = stats_t_cdf(t, DF[i]);
            /* compare the smaller tail, which carries the relative accuracy */
            double want = ps[j] < 0.5 ? ps[j] : 1 - ps[j], got = ps[j] < 0.5 ? back : 1 - back;
            CHECK_MSG(fabs(got - want) <= 1e-11 * want, "df %g p %g: cdf(%.17g) = %.17g", DF[i], ps[j], t, back);
        }
}

/* ---- p-values and CDF -------------------------------------------------------------------- */

TEST(p_values_match_closed_forms_for_1_and_2_df) {
    static const double ts[] = {0, 1e-8, 0.1, 0.5, 1, 2, 4.062, 10, 1e3, 1e6, 1e12};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) {
        for (int sign = -1; sign <= 1; sign += 2) {
            double t = sign * ts[i], a = fabs(t);
            /* df 1: p = 1 - 2 atan|t| / pi = 2 atan(1/|t|) / pi (the second form keeps digits) */
            double p1 = a == 0 ? 1.0 : 2 * atan(1 / a) / M_PI;
            CHECK_NEAR(p1, 1 - 2 * atan(a) / M_PI, 1e-15);
            /* df 2: p = 1 - |t| / sqrt(2 + t^2) = 2 / ((sqrt(2 + t^2) + |t|) sqrt(2 + t^2)) */
            double r = sqrt(2 + a * a), p2 = 2 / ((r + a) * r);
            CHECK_NEAR(p2, 1 - a / sqrt(2 + a * a), 1e-15);
            REL_NEAR(stats_t_p_two_sided(t, 1), p1, 1e-13);
            REL_NEAR(stats_t_p_two_sided(t, 2), p2, 1e-13);
        }
    }
}

TEST(t_cdf_matches_closed_forms_for_3_and_4_df) {
    static const double ts[] = {-50, -6, -2.5, -1, -0.2, 0, 0.3, 1, 3.182, 7, 40};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) {
        double t = ts[i];
        /* df 3: 1/2 + (t/sqrt3 / (1 + t^2/3) + atan(t/sqrt3)) / pi */
        double u = t / sqrt(3.0), f3 = 0.5 + (u / (1 + u * u) + atan(u)) / M_PI;
        /* df 4: 1/2 + (3/8) (t / sqrt(1 + t^2/4)) (1 - t^2 / (12 (1 + t^2/4))) */
        double w = 1 + t * t / 4, f4 = 0.5 + 0.375 * t / sqrt(w) * (1 - t * t / (12 * w));
        CHECK_NEAR(stats_t_cdf(t, 3), f3, 1e-14);
        CHECK_NEAR(stats_t_cdf(t, 4), f4, 1e-14);
        CHECK_NEAR(stats_t_cdf(t, 3) + stats_t_cdf(-t, 3), 1.0, 1e-15);
    }
    /* a tail the closed form cannot give accurately: df 1, cdf(-1e10) = atan(1e-10)/pi */
    REL_NEAR(stats_t_cdf(-1e10, 1), atan(1e-10) / M_PI, 1e-12);
    CHECK(stats_t_cdf(INFINITY, 5) == 1.0 && stats_t_cdf(-INFINITY, 5) == 0.0);
    CHECK(isnan(stats_t_cdf(NAN, 5)) && isnan(stats_t_cdf(1, 0)) && isnan(stats_t_p_two_sided(1, -1)));
    /* the normal limit: 2 (1 - Phi(1.959963984540054)) = 0.05 */
    REL_NEAR(stats_t_p_two_sided(1.959963984540054, INFINITY), 0.05, 1e-14);
}

/* A&S 26.7.3/26.7.4: P(|T| < t) for integer df as a finite sum, with theta = atan(t/sqrt(df)):
 * even df: sin(th) (1 + (1/2) cos^2 + (1 3)/(2 4) cos^4 + ... up to cos^(df-2));
 * odd df:  (2/pi) (th + sin(th) cos(th) (1 + (2/3) cos^2 + (2 4)/(3 5) cos^4 + ... up to
 * cos^(df-3))). */
static double central_series(double t, int df) { /* in long double: up to 10000 terms */
    long double th = atanl(t / sqrtl(df)), c2 = cosl(th) * cosl(th), sum = 0, term = 1;
    if (df % 2 == 0) {
        for (int k = 0; k <= df / 2 - 1; k++) {
            sum += term;
            term *= c2 * (2 * k + 1) / (2 * k + 2);
        }
        return (double)(sinl(th) * sum);
    }
    for (int k = 0; k <= (df - 3) / 2; k++) {
        sum += term;
        term *= c2 * (2 * k + 2) / (2 * k + 3);
    }
    return (double)(2 / acosl(-1) * (th + (df >= 3 ? sinl(th) * cosl(th) * sum : 0)));
}

TEST(t_cdf_matches_the_finite_series_for_integer_df) {
    /* covers both of the implementation's routes: df 3000 and 20000 lie partly in the large-df
     * expansion's region (t^2 < 0.025 df^(5/6)) */
    static const int DF[] = {1, 5, 6, 11, 30, 31, 120, 999, 3000, 20000};
    static const double ts[] = {0.001, 0.3, 1, 1.96, 2.5, 3.5, 5, 8, 12};
    for (size_t i = 0; i < sizeof DF / sizeof DF[0]; i++)
        for (size_t j = 0; j < sizeof ts / sizeof ts[0]; j++) {
            double a = central_series(ts[j], DF[i]);
            double central = stats_t_cdf(ts[j], DF[i]) - stats_t_cdf(-ts[j], DF[i]);
            CHECK_MSG(fabs(central - a) <= 1e-13, "df %d t %g: %.17g vs %.17g", DF[i], ts[j], central, a);
            CHECK_NEAR(1 - stats_t_p_two_sided(ts[j], DF[i]), a, 1e-13);
        }
}

TEST(large_df_tails_agree_between_the_two_methods) {
    /* Where t^2/df is not small the incomplete beta function is accurate (about eps df / t^2):
     * there the p-value must equal I_{df/(df+t^2)}(df/2, 1/2) to relative 1e-12 even in the far
     * tail, and on both sides of the switch to the expansion the log p-value must be smooth. */
    static const double DF[] = {2000, 5000, 1e4, 1e5};
    for (int i = 0; i < 4; i++) {
        double n = DF[i];
        /* y = 1 - x is a multiple of 2^-20, so x and 1 - x are both exact and t follows from them
         */
        for (double y = ldexp(ceil(ldexp(0.025 * pow(n, -1.0 / 6.0), 20)), -20); y < 0.5; y *= 1.5) {
            y = ldexp(floor(ldexp(y, 20)), -20);
            double x = 1 - y, t = sqrt(n * y / x);
            double p = stats_t_p_two_sided(t, n), ib = stats_incbeta(x, n / 2, 0.5);
            if (ib < 1e-290) break;
            /* t carries one rounding, which moves p by about t^2 eps */
            REL_NEAR(p, ib, 1e-13 + 4e-16 * t * t);
        }
        double tb = sqrt(0.025 * pow(n, 5.0 / 6.0)), h = 1e-9;
        double lm2 = log(stats_t_p_two_sided(tb * (1 - 3 * h), n));
        double lm1 = log(stats_t_p_two_sided(tb * (1 - h), n));
        double lp1 = log(stats_t_p_two_sided(tb * (1 + h), n));
        double lp2 = log(stats_t_p_two_sided(tb * (1 + 3 * h), n));
        double jump = (lp1 - (lp2 - lp1) / 2) - (lm1 + (lm1 - lm2) / 2);
        CHECK_MSG(fabs(jump) < 1e-12, "df %g: log p jumps by %g at t = %g", n, jump, tb);
    }
}

/* ---- incomplete beta --------------------------------------------------------------------- */

TEST(incomplete_beta_matches_closed_forms) {
    static const double xs[] = {0, 1e-12, 1e-3, 0.05, 0.2, 0.5, 0.7, 0.95, 0.999, 1};
    static const double as[] = {0.1, 0.5, 1, 2.5, 7, 40, 300};
    for (size_t i = 0; i < sizeof xs / sizeof xs[0]; i++) {
        double x = xs[i];
        for (size_t j = 0; j < sizeof as / sizeof as[0]; j++) {
            double a = as[j];
            REL_NEAR(stats_incbeta(x, a, 1), pow(x, a), 1e-13); /* I_x(a,1) = x^a */
            double want = -expm1(a * log1p(-x));                /* 1 - (1-x)^b */
            if (x == 1) want = 1;
            REL_NEAR(stats_incbeta(x, 1, a), want, 1e-13); /* I_x(1,b) */
            /* symmetry I_x(a,b) = 1 - I_{1-x}(b,a), on a pair x, 1 - x that are both exact */
            double y = 1 - x, xe = 1 - y;
            CHECK_NEAR(stats_incbeta(xe, a, 3.5) + stats_incbeta(y, 3.5, a), 1.0, 1e-14);
        }
        /* I_x(1/2, 1/2) = (2/pi) asin(sqrt x) = 1 - (2/pi) asin(sqrt(1 - x)), the form that keeps
         * its digits on each side */
        double arc = x <= 0.5 ? 2 / M_PI * asin(sqrt(x)) : 1 - 2 / M_PI * asin(sqrt(1 - x));
        REL_NEAR(stats_incbeta(x, 0.5, 0.5), arc, 1e-13);
        /* I_x(a, a) at x = 1/2 is 1/2 */
        CHECK_NEAR(stats_incbeta(0.5, xs[i] + 0.3, xs[i] + 0.3), 0.5, 1e-14);
    }
}

TEST(incomplete_beta_matches_binomial_tail_sums) {
    /* I_p(k, n-k+1) = P(X >= k) for X ~ Binomial(n, p), summed exactly term by term */
    static const int ns[] = {1, 5, 20, 60};
    static const double ps[] = {0.01, 0.3, 0.5, 0.77};
    for (size_t a = 0; a < 4; a++)
        for (size_t b = 0; b < 4; b++) {
            int n = ns[a];
            double p = ps[b];
            for (int k = 1; k <= n; k++) {
                double tail = 0;
                for (int j = n; j >= k; j--) { /* smallest terms first */
                    double lc = lgamma(n + 1.0) - lgamma(j + 1.0) - lgamma(n - j + 1.0);
                    tail += exp(lc + j * log(p) + (n - j) * log1p(-p));
                }
                double got = stats_incbeta(p, k, n - k + 1);
                CHECK_MSG(fabs(got - tail) <= 1e-12 * tail + 1e-300, "n %d k %d p %g: %.17g vs %.17g", n, k, p, got,
                          tail);
            }
        }
}

TEST(incomplete_beta_is_one_half_at_the_centre_for_large_equal_parameters) {
    /* I_{1/2}(a, a) = 1/2 by symmetry; for large a both the Stirling-series prefactor and a long
     * continued fraction are exercised. Also I_x(a,a) + I_{1-x}(a,a) = 1 off the centre. */
    for (double a = 20; a <= 1e5; a *= 3.7) {
        CHECK_MSG(fabs(stats_incbeta(0.5, a, a) - 0.5) < 1e-13, "a %g: %.17g", a, stats_incbeta(0.5, a, a));
        double x = 0.5 - ldexp(floor(ldexp(2 / sqrt(a), 30)), -30); /* x and 1 - x exact */
        CHECK_NEAR(stats_incbeta(x, a, a) + stats_incbeta(1 - x, a, a), 1.0, 1e-13);
    }
}

TEST(incomplete_beta_refuses_its_domain_edges) {
    CHECK(isnan(stats_incbeta(-0.1, 1, 1)));
    CHECK(isnan(stats_incbeta(1.1, 1, 1)));
    CHECK(isnan(stats_incbeta(0.5, 0, 1)));
    CHECK(isnan(stats_incbeta(0.5, 1, -1)));
    CHECK(isnan(stats_incbeta(NAN, 1, 1)));
    CHECK(isnan(stats_incbeta(0.5, INFINITY, 1)));
    CHECK(stats_incbeta(0, 2, 3) == 0 && stats_incbeta(1, 2, 3) == 1);
}

/* ---- moments and summaries --------------------------------------------------------------- */

TEST(mean_and_std_survive_a_large_offset) {
    /* 4, 7, 13, 16 (mean 10, variance 30) shifted by 1e9: the textbook case where the one-pass
     * sum-of-squares formula fails. */
    double x[4] = {1e9 + 4, 1e9 + 7, 1e9 + 13, 1e9 + 16}, m, s;
    CHECK_EQ_INT(stats_mean_std(x, 4, &m, &s), STATS_OK);
    CHECK_NEAR(m, 1e9 + 10, 1e-6);
    CHECK_NEAR(s * s, 30.0, 1e-6);
    double y[3] = {0.1, 0.1, 0.1};
    CHECK_EQ_INT(stats_mean_std(y, 3, &m, &s), STATS_OK);
    CHECK(m == 0.1 && s == 0.0); /* exactly, not a rounding residue */
    CHECK_EQ_INT(stats_mean_std(y, 1, &m, &s), STATS_OK);
    CHECK(m == 0.1 && isnan(s));
    CHECK_EQ_INT(stats_mean_std(NULL, 0, &m, &s), STATS_OK);
    CHECK(isnan(m) && isnan(s));
    double bad[2] = {1, NAN};
    CHECK_EQ_INT(stats_mean_std(bad, 2, &m, &s), STATS_ERR_INVALID);
    CHECK(isnan(m));
    double huge[3] = {1e308, 1.5e308, 1.7e308};
    CHECK_EQ_INT(stats_mean_std(huge, 3, &m, NULL), STATS_OK);
    REL_NEAR(m, 1.4e308, 1e-14);
}

/* Student (1908), "The probable error of a mean", table I: extra hours of sleep under two drugs
 * for the same 10 patients (the `sleep` data set of R). */
static const double SLEEP_1[10] = {0.7, -1.6, -0.2, -1.2, -0.1, 3.4, 3.7, 0.8, 0.0, 2.0};
static const double SLEEP_2[10] = {1.9, 0.8, 1.1, 0.1, -0.1, 4.4, 5.5, 1.6, 4.6, 3.4};
static const double SLEEP_D[10] = {1.2, 2.4, 1.3, 1.3, 0.0, 1.0, 1.8, 0.8, 4.6, 1.4};

static int check_sleep(const stats_summary *s) {
    /* the published paired t-test: mean 1.58, t = 4.0621, df 9, p-value = 0.002833,
     * 95 percent CI 0.7001142 2.4598858 (R: t.test(extra ~ group, data = sleep, paired = TRUE)) */
    return s->n == 10 && fabs(s->mean - 1.58) < 1e-12 && s->df == 9 && fabs(s->std - 1.229995483) < 5e-10 &&
           fabs(s->t - 4.0621) < 5e-5 && fabs(s->p - 0.002833) < 5e-7 && fabs(s->ci_lo - 0.7001142) < 5e-8 &&
           fabs(s->ci_hi - 2.4598858) < 5e-8 && s->reason == NULL;
}

TEST(paired_t_test_reproduces_students_sleep_data) {
    stats_summary s;
    CHECK_EQ_INT(stats_paired(SLEEP_2, SLEEP_1, 10, 0.95, &s), STATS_OK);
    CHECK_MSG(check_sleep(&s), "mean %.12g std %.12g t %.8g p %.8g ci [%.9g, %.9g]", s.mean, s.std, s.t, s.p, s.ci_lo,
              s.ci_hi);
    CHECK_EQ_INT(stats_summarize(SLEEP_D, 10, 0.95, &s), STATS_OK);
    CHECK_MSG(check_sleep(&s), "mean %.12g t %.8g p %.8g", s.mean, s.t, s.p);
    /* the other direction: same p, mirrored interval */
    stats_summary r;
    CHECK_EQ_INT(stats_paired(SLEEP_1, SLEEP_2, 10, 0.95, &r), STATS_OK);
    CHECK_NEAR(r.mean, -1.58, 1e-12);
    CHECK_NEAR(r.t, -s.t, 1e-12);
    CHECK_NEAR(r.p, s.p, 1e-15);
    CHECK_NEAR(r.ci_lo, -s.ci_hi, 1e-12);
    /* internal consistency: the interval is mean -+ t_{0.975,9} sem */
    CHECK_NEAR(s.ci_hi - s.mean, stats_t_quantile(0.975, 9) * s.std / sqrt(10.0), 1e-14);
    CHECK_NEAR(s.sem, s.std / sqrt(10.0), 1e-15);
}

TEST(summary_says_why_it_gives_no_interval) {
    stats_summary s;
    double x[3] = {2.0, 3.0, 7.0};
    CHECK_EQ_INT(stats_summarize(x, 0, 0.95, &s), STATS_OK);
    CHECK(s.n == 0 && isnan(s.mean) && isnan(s.std) && isnan(s.ci_lo) && isnan(s.p));
    CHECK(s.reason == STATS_REASON_NO_VALUES);
    CHECK_EQ_INT(stats_summarize(x, 1, 0.95, &s), STATS_OK);
    CHECK(s.n == 1 && s.mean == 2.0 && isnan(s.std) && isnan(s.sem) && isnan(s.ci_hi));
    CHECK(s.reason == STATS_REASON_NEEDS_2);
    CHECK_EQ_INT(stats_summarize(x, 2, 0.95, &s), STATS_OK);
    CHECK(s.n == 2 && s.mean == 2.5 && fabs(s.std - sqrt(0.5)) < 1e-15 && s.df == 1);
    CHECK(isnan(s.ci_lo) && isnan(s.ci_hi) && isnan(s.t) && isnan(s.p));
    CHECK(s.reason == STATS_REASON_NEEDS_3);
    CHECK(strcmp(s.reason, "needs at least 3 replicates for an interval") == 0);
    CHECK_EQ_INT(stats_summarize(x, 3, 0.95, &s), STATS_OK);
    CHECK(s.reason == NULL && isfinite(s.ci_lo) && isfinite(s.p));
    /* mean 4, std sqrt(7), t = 4 / (sqrt(7)/sqrt(3)) = 2.6186; df 2: p = 1 - t/sqrt(2+t^2) */
    double t = 4 / sqrt(7.0 / 3);
    CHECK_NEAR(s.t, t, 1e-13);
    REL_NEAR(s.p, 1 - t / sqrt(2 + t * t), 1e-12);
    CHECK_NEAR(s.ci_hi, 4 + 4.302652729749464 * sqrt(7.0 / 3), 1e-11); /* t_{.975,2} = sqrt(18.5125..) */
    /* all equal: a zero-width interval and no test */
    double c[4] = {0.25, 0.25, 0.25, 0.25};
    CHECK_EQ_INT(stats_summarize(c, 4, 0.95, &s), STATS_OK);
    CHECK(s.std == 0 && s.ci_lo == 0.25 && s.ci_hi == 0.25 && isnan(s.t) && isnan(s.p));
    CHECK(s.reason == STATS_REASON_NO_VARIATION);
    /* another confidence level: 99 % with df 9 uses t = 3.250 (NIST table) */
    CHECK_EQ_INT(stats_summarize(SLEEP_D, 10, 0.99, &s), STATS_OK);
    CHECK_NEAR((s.ci_hi - s.mean) / s.sem, 3.250, 0.0005);
}

TEST(summary_refuses_bad_arguments) {
    stats_summary s;
    double x[3] = {1, 2, INFINITY};
    CHECK_EQ_INT(stats_summarize(x, 3, 0.95, &s), STATS_ERR_INVALID);
    CHECK(isnan(s.mean) && s.reason == NULL);
    CHECK_EQ_INT(stats_summarize(x, 2, 0.95, NULL), STATS_ERR_INVALID);
    CHECK_EQ_INT(stats_summarize(NULL, 2, 0.95, &s), STATS_ERR_INVALID);
    CHECK_EQ_INT(stats_summarize(x, 2, 1.0, &s), STATS_ERR_INVALID);
    CHECK_EQ_INT(stats_summarize(x, 2, 0.0, &s), STATS_ERR_INVALID);
    CHECK_EQ_INT(stats_summarize(x, 2, NAN, &s), STATS_ERR_INVALID);
    CHECK_EQ_INT(stats_paired(x, NULL, 2, 0.95, &s), STATS_ERR_INVALID);
    double big[2] = {1.7e308, -1.7e308}, nbig[2] = {-1.7e308, 1.7e308};
    CHECK_EQ_INT(stats_paired(big, nbig, 2, 0.95, &s), STATS_ERR_INVALID); /* differences overflow */
}

/* ---- bootstrap --------------------------------------------------------------------------- */

TEST(bootstrap_is_deterministic_for_a_seed) {
    double lo1, hi1, lo2, hi2, lo3, hi3;
    const char *why = "unset";
    CHECK_EQ_INT(stats_bootstrap_mean_ci(SLEEP_D, 10, 0.95, 5000, 42, &lo1, &hi1, &why), STATS_OK);
    CHECK(why == NULL);
    CHECK_EQ_INT(stats_bootstrap_mean_ci(SLEEP_D, 10, 0.95, 5000, 42, &lo2, &hi2, NULL), STATS_OK);
    CHECK(memcmp(&lo1, &lo2, sizeof lo1) == 0 && memcmp(&hi1, &hi2, sizeof hi1) == 0);
    CHECK_EQ_INT(stats_bootstrap_mean_ci(SLEEP_D, 10, 0.95, 5000, 43, &lo3, &hi3, NULL), STATS_OK);
    CHECK(lo3 != lo1 || hi3 != hi1);
    /* the paired form resamples pairs: the same as resampling the differences */
    CHECK_EQ_INT(stats_bootstrap_paired_ci(SLEEP_2, SLEEP_1, 10, 0.95, 5000, 42, &lo2, &hi2, NULL), STATS_OK);
    CHECK_NEAR(lo2, lo1, 1e-14);
    CHECK_NEAR(hi2, hi1, 1e-14);
    /* the interval covers the t interval's centre (the sample mean) and lies near the t interval */
    CHECK(lo1 < 1.58 && 1.58 < hi1);
    CHECK(lo1 > 0.70 - 0.3 && hi1 < 2.46 + 0.3 && lo1 > 0.5 && hi1 < 2.9);
    /* a pinned value: the stream must not change between versions, or old results would not
     * reproduce (measured with this implementation; a change here is a reproducibility break) */
    double lo0, hi0;
    CHECK_EQ_INT(stats_bootstrap_mean_ci(SLEEP_D, 10, 0.95, 0, 1, &lo0, &hi0, NULL), STATS_OK);
    CHECK_MSG(fabs(lo0 - 0.96) < 1e-12 && fabs(hi0 - 2.37) < 1e-12, "%.17g %.17g", lo0, hi0);
}

TEST(bootstrap_spread_matches_the_closed_form) {
    /* The bootstrap distribution of a mean of n values has standard deviation
     * sqrt((n-1)/n) * s / sqrt(n) exactly; with n = 60 it is close to normal, so the 95 %
     * percentile interval is about mean -+ 1.96 of that. 40000 resamples: Monte Carlo error of
     * the ends about 1 %. */
    double x[60];
    uint64_t g = 12345;
    for (int i = 0; i < 60; i++) { /* a fixed sample from an LCG, unrelated to the bootstrap's */
        g = g * 6364136223846793005ULL + 1442695040888963407ULL;
        x[i] = 3.0 + (double)(g >> 11) * 0x1.0p-53;
    }
    double m, s, lo, hi;
    CHECK_EQ_INT(stats_mean_std(x, 60, &m, &s), STATS_OK);
    CHECK_EQ_INT(stats_bootstrap_mean_ci(x, 60, 0.95, 40000, 7, &lo, &hi, NULL), STATS_OK);
    double se = sqrt(59.0 / 60.0) * s / sqrt(60.0);
    CHECK_MSG(fabs((hi - lo) / (2 * 1.959963984540054 * se) - 1) < 0.03, "width %g vs %g", hi - lo, 2 * 1.96 * se);
    CHECK_NEAR(0.5 * (lo + hi), m, 0.05 * se);
}

TEST(bootstrap_says_why_it_gives_no_interval) {
    double lo, hi, x[3] = {1, 2, 3}, c[5] = {2, 2, 2, 2, 2};
    const char *why = NULL;
    CHECK_EQ_INT(stats_bootstrap_mean_ci(x, 2, 0.95, 100, 1, &lo, &hi, &why), STATS_OK);
    CHECK(isnan(lo) && isnan(hi) && why == STATS_REASON_NEEDS_3);
    CHECK_EQ_INT(stats_bootstrap_mean_ci(x, 1, 0.95, 100, 1, &lo, &hi, &why), STATS_OK);
    CHECK(why == STATS_REASON_NEEDS_2);
    CHECK_EQ_INT(stats_bootstrap_paired_ci(NULL, NULL, 0, 0.95, 100, 1, &lo, &hi, &why), STATS_OK);
    CHECK(why == STATS_REASON_NO_VALUES);
    CHECK_EQ_INT(stats_bootstrap_mean_ci(c, 5, 0.95, 100, 1, &lo, &hi, &why), STATS_OK);
    CHECK(lo == 2 && hi == 2 && why == NULL);
    CHECK_EQ_INT(stats_bootstrap_mean_ci(x, 3, 1.5, 100, 1, &lo, &hi, NULL), STATS_ERR_INVALID);
    CHECK_EQ_INT(stats_bootstrap_mean_ci(x, 3, 0.95, STATS_BOOTSTRAP_MAX + 1, 1, &lo, &hi, NULL), STATS_ERR_INVALID);
    CHECK_EQ_INT(stats_bootstrap_mean_ci(x, 3, 0.95, 100, 1, NULL, &hi, NULL), STATS_ERR_INVALID);
    CHECK_EQ_INT(stats_bootstrap_paired_ci(x, NULL, 3, 0.95, 100, 1, &lo, &hi, NULL), STATS_ERR_INVALID);
}

/* ---- bands ------------------------------------------------------------------------------- */

TEST(band_matches_a_hand_computation) {
    /* three replicates; the third is shorter, the second has a NaN at step 20 and is given out of
     * order; step 5 exists only in the first */
    stats_point r0[] = {{0, 4.0}, {5, 3.9}, {10, 3.0}, {20, 2.0}, {30, 1.0}};
    stats_point r1[] = {{30, 3.0}, {10, 5.0}, {0, 6.0}, {20, NAN}};
    stats_point r2[] = {{0, 5.0}, {10, 4.0}, {20, 2.5}};
    stats_series reps[3] = {{r0, 5}, {r1, 4}, {r2, 3}};
    stats_band_point *b = NULL;
    size_t n = 99;
    CHECK_EQ_INT(stats_band(reps, 3, &b, &n), STATS_OK);
    CHECK_EQ_INT(n, 5);
    /* step 0: 4, 6, 5 -> mean 5, std 1, min 4, max 6 */
    CHECK(b[0].step == 0 && b[0].n == 3 && b[0].mean == 5.0 && b[0].std == 1.0);
    CHECK(b[0].min == 4.0 && b[0].max == 6.0);
    /* step 5: one value -> std NaN */
    CHECK(b[1].step == 5 && b[1].n == 1 && b[1].mean == 3.9 && isnan(b[1].std));
    CHECK(b[1].min == 3.9 && b[1].max == 3.9);
    /* step 10: 3, 5, 4 -> mean 4, std 1 */
    CHECK(b[2].step == 10 && b[2].n == 3 && b[2].mean == 4.0 && b[2].std == 1.0);
    /* step 20: 2, (NaN left out), 2.5 -> mean 2.25, std sqrt(0.125) */
    CHECK(b[3].step == 20 && b[3].n == 2 && b[3].mean == 2.25);
    CHECK_NEAR(b[3].std, sqrt(0.125), 1e-15);
    CHECK(b[3].min == 2.0 && b[3].max == 2.5);
    /* step 30: 1, 3 -> mean 2, std sqrt(2) */
    CHECK(b[4].step == 30 && b[4].n == 2 && b[4].mean == 2.0);
    CHECK_NEAR(b[4].std, sqrt(2.0), 1e-15);
    free(b);
}

TEST(band_edges) {
    stats_band_point *b = (stats_band_point *)1;
    size_t n = 7;
    CHECK_EQ_INT(stats_band(NULL, 0, &b, &n), STATS_OK);
    CHECK(b == NULL && n == 0);
    stats_point only_nan[] = {{3, NAN}};
    stats_series s1[2] = {{only_nan, 1}, {NULL, 0}};
    CHECK_EQ_INT(stats_band(s1, 2, &b, &n), STATS_OK);
    CHECK(n == 1 && b[0].step == 3 && b[0].n == 0 && isnan(b[0].mean) && isnan(b[0].min));
    free(b);
    stats_point dup[] = {{1, 1.0}, {2, 2.0}, {1, 3.0}};
    stats_series s2[1] = {{dup, 3}};
    CHECK_EQ_INT(stats_band(s2, 1, &b, &n), STATS_ERR_INVALID);
    CHECK(b == NULL && n == 0);
    stats_series s3[1] = {{NULL, 2}};
    CHECK_EQ_INT(stats_band(s3, 1, &b, &n), STATS_ERR_INVALID);
    CHECK_EQ_INT(stats_band(s2, 1, NULL, &n), STATS_ERR_INVALID);
    /* a large offset keeps its digits, as in stats_mean_std */
    stats_point a[] = {{1, 1e9 + 4}}, c[] = {{1, 1e9 + 7}}, d[] = {{1, 1e9 + 13}}, e[] = {{1, 1e9 + 16}};
    stats_series s4[4] = {{a, 1}, {c, 1}, {d, 1}, {e, 1}};
    CHECK_EQ_INT(stats_band(s4, 4, &b, &n), STATS_OK);
    CHECK(n == 1 && b[0].n == 4);
    CHECK_NEAR(b[0].std * b[0].std, 30.0, 1e-6);
    free(b);
}

/* ---- intervals within bounds -------------------------------------------------------------- */

TEST(bounded_interval_is_the_exact_bootstrap_quantile) {
    /* The bootstrap distribution of the mean of {1, 2, 3, 10} enumerated by hand over its 4^4 = 256
     * equally likely resamples: P(mean = 1) = 1/256, P(1.25) = 4/256, P(1.5) = 10/256 (1112 in 6
     * orders, 1113 in 4), so its 2.5 % quantile is 1.5 (the cumulative 5/256 = 0.0195 < 0.025 <
     * 15/256); from above P(10) = 1/256, P(8.25) = 4/256 (10,10,10,3), P(8) = 4/256 (10,10,10,2),
     * so its 97.5 % quantile is 8 (5/256 < 0.025 < 9/256). 20000 resamples land well inside those
     * steps. With 3 values {1, 2, 6}, P(min) = P(max) = 1/27 > 0.025: the interval is [1, 6]. */
    const double x[] = {1, 2, 3, 10}, y[] = {1, 2, 6};
    double lo, hi;
    stats_ci_method used = STATS_CI_T;
    CHECK(stats_bounded_ci(x, 4, 0.95, 0, INFINITY, STATS_CI_BOOTSTRAP, 20000, 7, &lo, &hi, &used) == STATS_OK);
    CHECK(used == STATS_CI_BOOTSTRAP);
    CHECK_NEAR(lo, 1.5, 0);
    CHECK_NEAR(hi, 8, 0);
    CHECK(stats_bounded_ci(y, 3, 0.95, 0, INFINITY, STATS_CI_BOOTSTRAP, 20000, 7, &lo, &hi, &used) == STATS_OK);
    CHECK_NEAR(lo, 1, 0);
    CHECK_NEAR(hi, 6, 0);
    CHECK(!strcmp(stats_ci_method_name(STATS_CI_BOOTSTRAP), "bootstrap"));
    CHECK(!strcmp(stats_ci_method_name(STATS_CI_T), "t"));
}

TEST(bounded_interval_keeps_a_t_interval_inside_its_bounds) {
    /* Student's sleep data, drug 2 (Cushny & Peebles via Student 1908): mean 2.33, t interval
     * [0.8976775, 3.7623225] (R: t.test(sleep$extra[11:20])); inside its bounds it is kept. */
    const double x[] = {1.9, 0.8, 1.1, 0.1, -0.1, 4.4, 5.5, 1.6, 4.6, 3.4};
    double lo, hi;
    stats_ci_method used = STATS_CI_BOOTSTRAP;
    CHECK(stats_bounded_ci(x, 10, 0.95, -INFINITY, INFINITY, STATS_CI_T, 0, 1, &lo, &hi, &used) == STATS_OK);
    CHECK(used == STATS_CI_T);
    CHECK_NEAR(lo, 0.8976775, 1e-7);
    CHECK_NEAR(hi, 3.7623225, 1e-7);
    CHECK(stats_bounded_ci(x, 10, 0.95, -1, 6, STATS_CI_T, 0, 1, &lo, &hi, &used) == STATS_OK);
    CHECK(used == STATS_CI_T);
    CHECK_NEAR(lo, 0.8976775, 1e-7);
    /* fewer than 3 values: no interval, whatever the method */
    CHECK(stats_bounded_ci(x, 2, 0.95, 0, 1, STATS_CI_BOOTSTRAP, 0, 1, &lo, &hi, &used) == STATS_OK);
    CHECK(isnan(lo) && isnan(hi));
    CHECK(stats_bounded_ci(x, 3, 0.95, 1, 0, STATS_CI_T, 0, 1, &lo, &hi, NULL) == STATS_ERR_INVALID);
    CHECK(stats_bounded_ci(x, 3, 0.95, NAN, 0, STATS_CI_T, 0, 1, &lo, &hi, NULL) == STATS_ERR_INVALID);
}

TEST(intervals_that_crossed_a_bound_no_longer_do) {
    /* The cases: three accuracies whose t interval reached past 1 and below 0, and three
     * head spreads whose t interval went below 0 ([-0.101, 0.282] in the issue). */
    const double acc[] = {0.02, 0.5, 0.98}, spread[] = {0.02, 0.05, 0.19};
    stats_summary s;
    CHECK(stats_summarize(acc, 3, 0.95, &s) == STATS_OK);
    CHECK(s.ci_lo < 0 && s.ci_hi > 1); /* what the answer said before */
    CHECK(stats_summarize(spread, 3, 0.95, &s) == STATS_OK);
    CHECK(s.ci_lo < 0);
    for (int prefer = 0; prefer < 2; prefer++) {
        double lo, hi;
        stats_ci_method used;
        CHECK(stats_bounded_ci(acc, 3, 0.95, 0, 1, (stats_ci_method)prefer, 0, 1, &lo, &hi, &used) == STATS_OK);
        CHECK(used == STATS_CI_BOOTSTRAP);
        CHECK_MSG(lo >= 0 && hi <= 1 && lo <= 0.5 && 0.5 <= hi, "accuracy [%g, %g]", lo, hi);
        CHECK(stats_bounded_ci(spread, 3, 0.95, 0, INFINITY, (stats_ci_method)prefer, 0, 1, &lo, &hi, &used) ==
              STATS_OK);
        CHECK(used == STATS_CI_BOOTSTRAP);
        CHECK_MSG(lo >= 0.02 - 1e-15 && hi <= 0.19 + 1e-15 && lo < hi, "spread [%.17g, %.17g]", lo, hi);
    }
    /* the same values and seed give the same interval as the plain bootstrap */
    double lo, hi, blo, bhi;
    CHECK(stats_bounded_ci(spread, 3, 0.95, 0, INFINITY, STATS_CI_BOOTSTRAP, 500, 9, &lo, &hi, NULL) == STATS_OK);
    CHECK(stats_bootstrap_mean_ci(spread, 3, 0.95, 500, 9, &blo, &bhi, NULL) == STATS_OK);
    CHECK(lo == blo && hi == bhi);
}

TEST(wilson_interval_matches_newcombe_1998) {
    /* Newcombe (1998), Statistics in Medicine 17:857-872, table I, method 3 (score interval
     * without continuity correction), 95 %, printed to 4 decimals. */
    static const struct {
        long r, n;
        double lo, hi;
    } tab[] = {
        {81, 263, 0.2553, 0.3662}, {15, 148, 0.0624, 0.1605}, {0, 20, 0.0000, 0.1611},
        {1, 29, 0.0061, 0.1718},   {29, 29, 0.8830, 1.0000},
    };
    for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++) {
        double lo, hi;
        CHECK(stats_wilson(tab[i].r, tab[i].n, 0.95, &lo, &hi) == STATS_OK);
        CHECK_MSG(fabs(lo - tab[i].lo) <= 0.00005 + 1e-12 && fabs(hi - tab[i].hi) <= 0.00005 + 1e-12,
                  "%ld/%ld: [%.5f, %.5f], Newcombe [%.4f, %.4f]", tab[i].r, tab[i].n, lo, hi, tab[i].lo, tab[i].hi);
    }
    /* the ends are exact, the interval never leaves [0, 1] */
    double lo, hi;
    CHECK(stats_wilson(0, 3, 0.95, &lo, &hi) == STATS_OK && lo == 0 && hi < 1);
    CHECK(stats_wilson(3, 3, 0.95, &lo, &hi) == STATS_OK && hi == 1 && lo > 0);
    for (long r = 0; r <= 7; r++) CHECK(stats_wilson(r, 7, 0.999, &lo, &hi) == STATS_OK && lo >= 0 && hi <= 1);
    CHECK(stats_wilson(4, 3, 0.95, &lo, &hi) == STATS_ERR_INVALID && isnan(lo));
    CHECK(stats_wilson(0, 0, 0.95, &lo, &hi) == STATS_ERR_INVALID);
    CHECK(stats_wilson(1, 2, 1.0, &lo, &hi) == STATS_ERR_INVALID);
}

int main(void) {
    RUN(t_quantile_matches_the_published_table);
    RUN(t_quantile_matches_closed_forms_for_1_2_and_4_df);
    RUN(t_quantile_follows_cornish_fisher_for_large_df);
    RUN(t_quantile_edges);
    RUN(t_quantile_inverts_the_cdf_for_fractional_df);
    RUN(p_values_match_closed_forms_for_1_and_2_df);
    RUN(t_cdf_matches_closed_forms_for_3_and_4_df);
    RUN(t_cdf_matches_the_finite_series_for_integer_df);
    RUN(large_df_tails_agree_between_the_two_methods);
    RUN(incomplete_beta_matches_closed_forms);
    RUN(incomplete_beta_matches_binomial_tail_sums);
    RUN(incomplete_beta_is_one_half_at_the_centre_for_large_equal_parameters);
    RUN(incomplete_beta_refuses_its_domain_edges);
    RUN(mean_and_std_survive_a_large_offset);
    RUN(paired_t_test_reproduces_students_sleep_data);
    RUN(summary_says_why_it_gives_no_interval);
    RUN(summary_refuses_bad_arguments);
    RUN(bootstrap_is_deterministic_for_a_seed);
    RUN(bootstrap_spread_matches_the_closed_form);
    RUN(bootstrap_says_why_it_gives_no_interval);
    RUN(band_matches_a_hand_computation);
    RUN(band_edges);
    RUN(bounded_interval_is_the_exact_bootstrap_quantile);
    RUN(bounded_interval_keeps_a_t_interval_inside_its_bounds);
    RUN(intervals_that_crossed_a_bound_no_longer_do);
    RUN(wilson_interval_matches_newcombe_1998);
    return test_summary();
}
