/* The kernel paths: one table, one row per way the engine can compute its matrix products on this
 * machine. A process chooses one path once, at its first need: the one named by the environment
 * variable ATTNLAB_KERNEL_PATH when set (refused, with the reason, when this CPU cannot run it),
 * else the fastest of the rows the CPU can run by the FLOP rate of each row's unit, measured in a
 * few milliseconds on one thread (best of 20 short interleaved rounds). kernel_path_force changes
 * the choice at run time (the service's API; tests and benchmarks).
 *
 * The path decides how products are computed, the run's precision (precision.h) what they compute:
 * a run in fp32 always takes the fp32 path; a run in bf16 takes the chosen path when it is a bf16
 * one, else the fastest bf16 unit the CPU has (or, when fp32 was forced, or when the CPU has none,
 * the portable bf16 loops). A run keeps the path it started with (lmhead_bf16 holds it). Results
 * are bit-identical for any thread count within one path, not across paths: a checkpoint records
 * its path ("kernel_path"), and a resume on another path is reported (train.h, on_notice). */
#ifndef ENGINE_KERNEL_PATH_H
#define ENGINE_KERNEL_PATH_H

#include <stddef.h>

#include "error.h"
#include "precision.h"

typedef enum {
    KERNEL_PATH_AMX = 0,           /* bf16 products on AMX tiles (TDPBF16PS), fp32 accumulation */
    KERNEL_PATH_AVX512_BF16 = 1,   /* bf16 products through vdpbf16ps, fp32 accumulation */
    KERNEL_PATH_FP32 = 2,          /* fp32 products: the engine's AVX-512 FMA kernels (BLAS without AVX-512F) */
    KERNEL_PATH_BF16_PORTABLE = 3, /* bf16 products in portable C loops; never chosen by measurement: what
                                    * a bf16 run gets on a CPU without a bf16 unit, or under a forced fp32 */
    KERNEL_PATH_COUNT
} kernel_path_id;

typedef struct {
    const char *name;         /* "amx", "avx512_bf16", "fp32", "bf16_portable": ATTNLAB_KERNEL_PATH's words */
    const char *unit;         /* the instruction whose rate is the path's peak ("TDPBF16PS", ...) */
    precision_kind precision; /* what its products read: fp32, or bf16 (with fp32 accumulation) */
    int measured;             /* 1: a candidate of the automatic choice, by the rate of its unit */
} kernel_path;

/* The row of a path (id in 0..KERNEL_PATH_COUNT-1), or NULL. */
const kernel_path *kernel_path_row(kernel_path_id id);
/* The id of the path named s, or -1. */
int kernel_path_parse(const char *s);
/* 1 when this CPU and OS can run path id; else 0 and, when why is non-NULL, the reason in why
 * ("CPU lacks AVX-512 BF16", "CPU lacks AMX-BF16", ...). */
int kernel_path_supported(kernel_path_id id, char *why, size_t why_len);
/* Tests: on 1, the amx path counts as runnable on any CPU (its products computed by the emulated
 * tile kernels lmhead_amx_use installs, lmhead_amx.h); on 0, as the CPU and the build allow. */
void kernel_path_amx_emulated(int on);
/* One thread's FLOP/s of the path's unit as measured for the choice (0 for a path the CPU cannot run
 * or that is not measured). Measures on the first call (a few ms), then answers from the cache. */
double kernel_path_rate(kernel_path_id id);

/* Chooses the process's path if not done yet and reports the environment: ENGINE_ERR_INVALID with
 * the reason when ATTNLAB_KERNEL_PATH names no path or one this CPU cannot run (the automatic choice
 * is then used by the functions below, and train_run refuses to start, with the same message).
 * The service calls it at start and exits on an error. Thread-safe; the environment is read once. */
engine_status kernel_path_init(engine_error *err);
/* The process's path now: forced (kernel_path_force, else ATTNLAB_KERNEL_PATH) when it can run,
 * else the fastest measured. For /api/health and the first line of `attnlabd train`. */
kernel_path_id kernel_path_chosen(void);
const char *kernel_path_name(void); /* kernel_path_row(kernel_path_chosen())->name */
/* The path a new run (or model) in precision p computes on: see the header comment. */
kernel_path_id kernel_path_for_precision(precision_kind p);
const char *kernel_path_name_for_precision(precision_kind p);
/* Forces the process's path (name: a row's name), or returns to the automatic choice (name NULL,
 * "" or "auto"); runs already started keep theirs. ENGINE_ERR_INVALID, choice unchanged, for an
 * unknown name or a path this CPU cannot run. */
engine_status kernel_path_force(const char *name, engine_error *err);

#endif
