#include "kernel_path.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu.h"
#include "lmhead_amx_hw.h" /* LMHEAD_HAVE_AMX: whether this build has the hardware tile kernels */
#include "real.h"

static const kernel_path rows[KERNEL_PATH_COUNT] = {
    [KERNEL_PATH_AMX] = {"amx", "TDPBF16PS", PRECISION_BF16, 1},
    [KERNEL_PATH_AVX512_BF16] = {"avx512_bf16", "vdpbf16ps", PRECISION_BF16, 1},
    [KERNEL_PATH_FP32] = {"fp32", "fp32 FMA", PRECISION_FP32, 1},
    [KERNEL_PATH_BF16_PORTABLE] = {"bf16_portable", "portable C", PRECISION_BF16, 0},
};

const kernel_path *kernel_path_row(kernel_path_id id) { return (unsigned)id < KERNEL_PATH_COUNT ? &rows[id] : NULL; }

int kernel_path_parse(const char *s) {
    if (!s) return -1;
    for (int i = 0; i < KERNEL_PATH_COUNT; i++)
        if (!strcmp(s, rows[i].name)) return i;
    return -1;
}

static _Atomic int amx_emulated;

void kernel_path_amx_emulated(int on) { atomic_store(&amx_emulated, on != 0); }

int kernel_path_supported(kernel_path_id id, char *why, size_t why_len) {
    const char *no = NULL;
    switch (id) {
    case KERNEL_PATH_AMX:
        if (atomic_load(&amx_emulated)) break;
#ifdef LMHEAD_HAVE_AMX
        if (!cpu_has_amx_bf16()) no = cpu_amx_missing() ? cpu_amx_missing() : "CPU lacks AMX-BF16";
#else
        no = "this build has no AMX kernels (not an x86-64 GCC build)";
#endif
        break;
    case KERNEL_PATH_AVX512_BF16:
        if (!cpu_has_avx512bf16()) no = "CPU lacks AVX-512 BF16";
        break;
    case KERNEL_PATH_FP32:
    case KERNEL_PATH_BF16_PORTABLE: break;
    default: no = "no such kernel path"; break;
    }
#if REAL_IS_DOUBLE
    if (!no && rows[id].precision == PRECISION_BF16) no = "the double build has no bf16 products";
#endif
    if (no && why && why_len) snprintf(why, why_len, "%s", no);
    return no == NULL;
}

/* ---- the measured rates, once per process ---- */
static pthread_once_t rate_once = PTHREAD_ONCE_INIT;
static double rate[KERNEL_PATH_COUNT];

static void rate_init(void) {
    double f, d, a;
    cpu_quick_peaks(20, &f, &d, &a);
    rate[KERNEL_PATH_FP32] = f;
    rate[KERNEL_PATH_AVX512_BF16] = d;
    rate[KERNEL_PATH_AMX] = a;
}

double kernel_path_rate(kernel_path_id id) {
    if ((unsigned)id >= KERNEL_PATH_COUNT || !rows[id].measured || !kernel_path_supported(id, NULL, 0)) return 0;
    pthread_once(&rate_once, rate_init);
    return rate[id];
}

/* The fastest measured path this CPU can run now, among those of precision want (-1: any). */
static kernel_path_id fastest(int want) {
    kernel_path_id best = KERNEL_PATH_FP32;
    double best_rate = -1;
    for (int i = 0; i < KERNEL_PATH_COUNT; i++) {
        if (!rows[i].measured || (want >= 0 && (int)rows[i].precision != want)) continue;
        double r = kernel_path_rate((kernel_path_id)i);
        if (kernel_path_supported((kernel_path_id)i, NULL, 0) && r > best_rate) {
            best = (kernel_path_id)i;
            best_rate = r;
        }
    }
    if (want == PRECISION_BF16 && best_rate <= 0) return KERNEL_PATH_BF16_PORTABLE;
    return best;
}

/* ---- the environment and the forced path ---- */
static pthread_once_t env_once = PTHREAD_ONCE_INIT;
static engine_error env_err; /* env_err.status: what ATTNLAB_KERNEL_PATH came to */
static atomic_int forced = -1;

static void env_init(void) {
    const char *s = getenv("ATTNLAB_KERNEL_PATH");
    env_err.status = ENGINE_OK;
    if (!s || !*s || !strcmp(s, "auto")) return;
    if (kernel_path_force(s, &env_err) != ENGINE_OK) {
        char why[sizeof env_err.message];
        snprintf(why, sizeof why, "%s", env_err.message);
        engine_fail(&env_err, ENGINE_ERR_INVALID, "ATTNLAB_KERNEL_PATH=%s: %s", s, why);
    }
}

engine_status kernel_path_init(engine_error *err) {
    pthread_once(&env_once, env_init);
    if (env_err.status != ENGINE_OK) {
        if (err) *err = env_err;
        return env_err.status;
    }
    (void)kernel_path_rate(KERNEL_PATH_FP32);
    return ENGINE_OK;
}

engine_status kernel_path_force(const char *name, engine_error *err) {
    if (!name || !*name || !strcmp(name, "auto")) {
        atomic_store(&forced, -1);
        return ENGINE_OK;
    }
    int id = kernel_path_parse(name);
    if (id < 0) {
        char names[128] = "";
        for (int i = 0; i < KERNEL_PATH_COUNT; i++)
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? ", " : "", rows[i].name);
        return engine_fail(err, ENGINE_ERR_INVALID, "no kernel path '%s' (one of %s, or auto)", name, names);
    }
    char why[160];
    if (!kernel_path_supported((kernel_path_id)id, why, sizeof why))
        return engine_fail(err, ENGINE_ERR_INVALID, "this CPU cannot run kernel path %s: %s", name, why);
    atomic_store(&forced, id);
    return ENGINE_OK;
}

kernel_path_id kernel_path_chosen(void) {
    pthread_once(&env_once, env_init);
    int f = atomic_load(&forced);
    if (f >= 0 && kernel_path_supported((kernel_path_id)f, NULL, 0)) return (kernel_path_id)f;
    return fastest(-1);
}

const char *kernel_path_name(void) { return rows[kernel_path_chosen()].name; }

kernel_path_id kernel_path_for_precision(precision_kind p) {
    if (p != PRECISION_BF16) return KERNEL_PATH_FP32;
    kernel_path_id c = kernel_path_chosen();
    if (rows[c].precision == PRECISION_BF16) return c;
    /* fp32 chosen: forced, the bf16 products go the portable way; measured, the fastest bf16 unit */
    if (atomic_load(&forced) == KERNEL_PATH_FP32) return KERNEL_PATH_BF16_PORTABLE;
    return fastest(PRECISION_BF16);
}

const char *kernel_path_name_for_precision(precision_kind p) { return rows[kernel_path_for_precision(p)].name; }

/* bf16 pays only where a bf16 unit outruns fp32 FMAs: on a CPU whose vdpbf16ps delivers fewer FLOP/s
 * than its FMAs (measured: an Intel Emerald Rapids, half) and that has no AMX, bf16 training is
 * slower. The path table measures and decides (precision.h). */
precision_kind precision_default(void) { return kernel_path_row(kernel_path_chosen())->precision; }
