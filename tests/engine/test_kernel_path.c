/* The kernel path table: its rows and names, what this CPU can run (a path it cannot is named with
 * the reason), the automatic choice (the fastest measured unit), forcing through the API and through
 * ATTNLAB_KERNEL_PATH (in a child process: the environment is read once per process), a run that
 * refuses to start under a path the CPU cannot run, the path a run reports and records in its
 * checkpoint, the notice of a resume on another path, and each step's time split by part. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../support/test.h"
#include "attention.h"
#include "cpu.h"
#include "kernel_path.h"
#include "lmhead.h"
#include "lmhead_amx.h"
#include "safetensors.h"
#include "train.h"

static char dir[256];

TEST(table_rows_and_names) {
    static const char *want[KERNEL_PATH_COUNT] = {"amx", "avx512_bf16", "fp32", "bf16_portable"};
    for (int i = 0; i < KERNEL_PATH_COUNT; i++) {
        const kernel_path *r = kernel_path_row((kernel_path_id)i);
        CHECK(r != NULL);
        CHECK_MSG(!strcmp(r->name, want[i]), "row %d is %s", i, r->name);
        CHECK_EQ_INT(kernel_path_parse(r->name), i);
        CHECK(r->unit && *r->unit);
        CHECK_EQ_INT(r->precision, i == KERNEL_PATH_FP32 ? PRECISION_FP32 : PRECISION_BF16);
        CHECK_EQ_INT(r->measured, i != KERNEL_PATH_BF16_PORTABLE);
    }
    CHECK(kernel_path_row(KERNEL_PATH_COUNT) == NULL);
    CHECK_EQ_INT(kernel_path_parse("avx2"), -1);
    CHECK_EQ_INT(kernel_path_parse(NULL), -1);
}

TEST(support_follows_the_cpu) {
    char why[160] = "";
    CHECK(kernel_path_supported(KERNEL_PATH_FP32, why, sizeof why));
    CHECK(kernel_path_supported(KERNEL_PATH_BF16_PORTABLE, why, sizeof why));
    CHECK_EQ_INT(kernel_path_supported(KERNEL_PATH_AVX512_BF16, why, sizeof why), cpu_has_avx512bf16());
    if (!cpu_has_avx512bf16()) CHECK(strstr(why, "AVX-512 BF16") != NULL);
    int amx = kernel_path_supported(KERNEL_PATH_AMX, why, sizeof why);
    CHECK_EQ_INT(amx, cpu_has_amx_bf16()); /* an x86-64 GCC build has the tile kernels */
    /* with the emulated tiles (tests) the amx path runs anywhere, and goes back to the CPU's answer */
    kernel_path_amx_emulated(1);
    CHECK(kernel_path_supported(KERNEL_PATH_AMX, NULL, 0));
    kernel_path_amx_emulated(0);
    CHECK_EQ_INT(kernel_path_supported(KERNEL_PATH_AMX, NULL, 0), amx);
    if (!amx) {
        CHECK(why[0] != 0);
        printf("amx: %s\n", why);
    }
    /* the test switch turns every bf16 unit off */
    cpu_disable_bf16(1);
    int dp = kernel_path_supported(KERNEL_PATH_AVX512_BF16, NULL, 0),
        am = kernel_path_supported(KERNEL_PATH_AMX, NULL, 0);
    kernel_path_id off = kernel_path_chosen();
    precision_kind pd = precision_default();
    cpu_disable_bf16(0);
    CHECK(!dp && !am);
    CHECK_EQ_INT(off, KERNEL_PATH_FP32);
    CHECK_EQ_INT(pd, PRECISION_FP32);
}

TEST(automatic_choice_is_the_fastest_measured_unit) {
    engine_error err;
    CHECK(kernel_path_init(&err) == ENGINE_OK);
    kernel_path_id c = kernel_path_chosen();
    CHECK(kernel_path_supported(c, NULL, 0));
    CHECK(kernel_path_row(c)->measured);
    for (int i = 0; i < KERNEL_PATH_COUNT; i++) {
        double r = kernel_path_rate((kernel_path_id)i);
        printf("%-14s %s  %8.1f GFLOP/s per thread%s\n", kernel_path_row((kernel_path_id)i)->name,
               kernel_path_supported((kernel_path_id)i, NULL, 0) ? "runs" : "no  ", r / 1e9,
               i == (int)c ? "  <- chosen" : "");
        if (kernel_path_supported((kernel_path_id)i, NULL, 0) && kernel_path_row((kernel_path_id)i)->measured)
            CHECK_MSG(r > 0 && r <= kernel_path_rate(c), "%s measures %.1f, faster than the chosen %s",
                      kernel_path_row((kernel_path_id)i)->name, r / 1e9, kernel_path_name());
    }
    CHECK(!strcmp(kernel_path_name(), kernel_path_row(c)->name));
    CHECK_EQ_INT(precision_default(), kernel_path_row(c)->precision);
    CHECK_EQ_INT(kernel_path_for_precision(PRECISION_FP32), KERNEL_PATH_FP32);
    kernel_path_id b = kernel_path_for_precision(PRECISION_BF16);
    CHECK(kernel_path_row(b)->precision == PRECISION_BF16 && kernel_path_supported(b, NULL, 0));
    if (kernel_path_row(c)->precision == PRECISION_BF16) CHECK_EQ_INT(b, c);
    if (!cpu_has_avx512bf16() && !cpu_has_amx_bf16()) CHECK_EQ_INT(b, KERNEL_PATH_BF16_PORTABLE);
}

TEST(forcing_through_the_api) {
    engine_error err;
    kernel_path_id before = kernel_path_chosen();
    CHECK(kernel_path_force("sse2", &err) == ENGINE_ERR_INVALID);
    CHECK_MSG(strstr(err.message, "no kernel path 'sse2'") && strstr(err.message, "avx512_bf16"), "%s", err.message);
    CHECK_EQ_INT(kernel_path_chosen(), before);
    for (int i = 0; i < KERNEL_PATH_COUNT; i++) {
        const char *name = kernel_path_row((kernel_path_id)i)->name;
        char why[160];
        if (!kernel_path_supported((kernel_path_id)i, why, sizeof why)) {
            CHECK(kernel_path_force(name, &err) == ENGINE_ERR_INVALID);
            CHECK_MSG(strstr(err.message, "cannot run kernel path") && strstr(err.message, why), "%s", err.message);
            CHECK_EQ_INT(kernel_path_chosen(), before);
            continue;
        }
        CHECK(kernel_path_force(name, &err) == ENGINE_OK);
        CHECK_EQ_INT(kernel_path_chosen(), i);
        CHECK(!strcmp(kernel_path_name(), name));
        CHECK_EQ_INT(precision_default(), kernel_path_row((kernel_path_id)i)->precision);
    }
    /* fp32 forced: a bf16 run's products go the portable way */
    CHECK(kernel_path_force("fp32", &err) == ENGINE_OK);
    CHECK_EQ_INT(kernel_path_for_precision(PRECISION_BF16), KERNEL_PATH_BF16_PORTABLE);
    CHECK(kernel_path_force("auto", &err) == ENGINE_OK);
    CHECK_EQ_INT(kernel_path_chosen(), before);
    CHECK(kernel_path_force(NULL, &err) == ENGINE_OK);
}

/* In a fresh process (this program again, with --env-child): ATTNLAB_KERNEL_PATH=value. Exit status
 * 0 when kernel_path_init accepts it and the chosen path is then `want`; 1 when it refuses it with a
 * message naming the variable and `reason`, and a training run refuses to start with the same
 * message; 2 otherwise. */
static int env_child(const char *want, const char *reason) {
    engine_error err;
    engine_status rc = kernel_path_init(&err);
    if (rc == ENGINE_OK) return *want && !strcmp(kernel_path_name(), want) ? 0 : 2;
    if (rc != ENGINE_ERR_INVALID || !strstr(err.message, "ATTNLAB_KERNEL_PATH=") || !strstr(err.message, reason))
        return 2;
    train_config c;
    train_config_defaults(&c);
    c.model.n_layer = 1;
    c.model.d_model = 16;
    c.model.n_head = 1;
    c.model.seq_len = 4;
    c.model.vocab = 8;
    c.batch = 1;
    c.steps = 1;
    engine_error e2;
    train_source src = {0};
    rc = train_run_source(&c, &src, 1, NULL, NULL, &e2);
    return rc == ENGINE_ERR_INVALID && !strcmp(e2.message, err.message) ? 1 : 2;
}

static int child_with(const char *value, const char *want, const char *reason) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        setenv("ATTNLAB_KERNEL_PATH", value, 1);
        execl("/proc/self/exe", "test_kernel_path", "--env-child", want ? want : "", reason, (char *)NULL);
        _exit(3);
    }
    int st;
    if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st)) return -1;
    return WEXITSTATUS(st);
}

TEST(forcing_through_the_environment) {
    CHECK_EQ_INT(child_with("fp32", "fp32", ""), 0);
    CHECK_EQ_INT(child_with("bf16_portable", "bf16_portable", ""), 0);
    CHECK_EQ_INT(child_with("auto", kernel_path_name(), ""), 0);
    CHECK_EQ_INT(child_with("sse2", NULL, "no kernel path 'sse2'"), 1);
    for (int i = 0; i < KERNEL_PATH_COUNT; i++) {
        char why[160];
        const char *name = kernel_path_row((kernel_path_id)i)->name;
        if (kernel_path_supported((kernel_path_id)i, why, sizeof why))
            CHECK_MSG(child_with(name, name, "") == 0, "ATTNLAB_KERNEL_PATH=%s refused", name);
        else
            CHECK_MSG(child_with(name, NULL, why) == 1, "ATTNLAB_KERNEL_PATH=%s (%s) not refused as it should", name,
                      why);
    }
}

/* ---- a run reports its path, records it, and says so when a resume changes it ---- */
typedef struct {
    char path[32];
    char notice[256];
    int notices, steps, times_ok;
} seen;

static void on_step(void *ctx, const train_step_metrics *m) {
    seen *s = ctx;
    snprintf(s->path, sizeof s->path, "%s", m->kernel_path ? m->kernel_path : "(null)");
    /* the step's time by part: none negative beyond rounding, the output layer and the products
     * measured, and they add up to step_ms */
    double sum = 0;
    int ok = m->time_ms != NULL;
    for (int i = 0; ok && i < TRAIN_TIME_PARTS; i++) {
        ok = m->time_ms[i] >= -1e-6 && train_time_part_name(i) != NULL;
        sum += m->time_ms[i];
    }
    ok = ok && m->time_ms[TRAIN_TIME_OUTPUT_LAYER] > 0 && m->time_ms[TRAIN_TIME_PRODUCTS] > 0 &&
         m->time_ms[TRAIN_TIME_ATTENTION] > 0 && m->time_ms[TRAIN_TIME_OPTIMIZER] > 0 &&
         fabs(sum - m->step_ms) <= 1e-6 * m->step_ms;
    s->steps++;
    s->times_ok += ok;
}

static void on_notice(void *ctx, const char *msg) {
    seen *s = ctx;
    snprintf(s->notice, sizeof s->notice, "%s", msg);
    s->notices++;
}

static engine_status zero_batch(void *ctx, corpus_split split, long step, int32_t *out, engine_error *err) {
    (void)ctx;
    (void)split;
    (void)err;
    for (int i = 0; i < 4 * 9; i++) out[i] = (int32_t)((i * 7 + step) % 31);
    return ENGINE_OK;
}

static void tiny(train_config *c, precision_kind p, long steps, const char *ck) {
    train_config_defaults(c);
    c->model.n_layer = 1;
    c->model.n_head = 2;
    c->model.d_model = 32;
    c->model.seq_len = 8;
    c->model.vocab = 31;
    c->model.attention = attention_index("rope");
    c->batch = 4;
    c->steps = steps;
    c->eval_every = 0;
    c->precision = p;
    c->checkpoint_path = ck;
}

static int meta_is(const char *file, const char *key, const char *want) {
    safetensors *st;
    engine_error err;
    if (safetensors_open(&st, file, &err)) return 0;
    const char *v = safetensors_meta(st, key);
    int ok = v && !strcmp(v, want);
    if (!ok) printf("%s: %s = %s, want %s\n", file, key, v ? v : "(none)", want);
    safetensors_close(st);
    return ok;
}

TEST(runs_report_record_and_notice_their_path) {
    char ck[300], ck2[300];
    snprintf(ck, sizeof ck, "%s/a.safetensors", dir);
    snprintf(ck2, sizeof ck2, "%s/b.safetensors", dir);
    train_source src = {.batch = zero_batch};
    engine_error err;
    seen s = {0};
    train_callbacks cb = {.ctx = &s, .on_step = on_step, .on_notice = on_notice};
    train_config c;
    for (int p = 0; p < 2; p++) {
        tiny(&c, p ? PRECISION_BF16 : PRECISION_FP32, 2, ck);
        const char *want = train_config_kernel_path(&c);
        CHECK(!strcmp(want, kernel_path_name_for_precision(c.precision)));
        CHECK(train_run_source(&c, &src, 2, NULL, &cb, &err) == ENGINE_OK);
        CHECK_MSG(!strcmp(s.path, want), "reported %s, expected %s", s.path, want);
        CHECK(meta_is(ck, "kernel_path", want));
        CHECK(meta_is(ck, "precision", p ? "bf16" : "fp32"));
    }
    CHECK_EQ_INT(s.notices, 0);
    CHECK_MSG(s.times_ok == s.steps && s.steps == 4, "%d of %d steps had a sound time split", s.times_ok, s.steps);
    CHECK(train_time_part_name(TRAIN_TIME_PARTS) == NULL && !strcmp(train_time_part_name(0), "output_layer"));
    /* a bf16 checkpoint resumed under a forced fp32 path continues on the portable bf16 loops, and says so */
    const char *first = train_config_kernel_path(&c);
    CHECK(kernel_path_force("fp32", &err) == ENGINE_OK);
    tiny(&c, PRECISION_BF16, 4, ck2);
    engine_status rc = train_run_source(&c, &src, 2, ck, &cb, &err);
    kernel_path_force(NULL, &err);
    CHECK_MSG(rc == ENGINE_OK, "%s", err.message);
    CHECK(!strcmp(s.path, "bf16_portable"));
    CHECK(meta_is(ck2, "kernel_path", "bf16_portable"));
    if (strcmp(first, "bf16_portable") != 0) {
        CHECK_EQ_INT(s.notices, 1);
        CHECK_MSG(strstr(s.notice, first) && strstr(s.notice, "bf16_portable") && strstr(s.notice, "not bit-identical"),
                  "%s", s.notice);
    } else {
        CHECK_EQ_INT(s.notices, 0);
    }
    /* the key is the engine's own */
    const char *kv[2] = {"kernel_path", "x"};
    tiny(&c, PRECISION_FP32, 1, NULL);
    c.meta_kv = kv;
    c.n_meta = 1;
    CHECK(train_config_validate(&c, &err) == ENGINE_ERR_INVALID);
}

int main(int argc, char **argv) {
    if (argc == 4 && !strcmp(argv[1], "--env-child")) return env_child(argv[2], argv[3]);
    snprintf(dir, sizeof dir, "%s/attnlab-kpath-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(dir)) return 1;
    RUN(table_rows_and_names);
    RUN(support_follows_the_cpu);
    RUN(automatic_choice_is_the_fastest_measured_unit);
    RUN(forcing_through_the_api);
    RUN(forcing_through_the_environment);
    RUN(runs_report_record_and_notice_their_path);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd)) return 1;
    return test_summary();
}
