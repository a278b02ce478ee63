/* The arithmetic of a run's matrix products: fp32 throughout, or bf16 mixed precision (bf16 inputs,
 * fp32 accumulation, fp32 master weights and optimiser state; see bf16.h). A run records its
 * precision in its config, so a resumed run computes as the first attempt did. */
#ifndef ENGINE_PRECISION_H
#define ENGINE_PRECISION_H

typedef enum { PRECISION_FP32 = 0, PRECISION_BF16 = 1 } precision_kind;

const char *precision_name(precision_kind p);          /* "fp32", "bf16" */
int precision_parse(const char *s, precision_kind *p); /* 0 ok, -1 unknown (p untouched) */
/* What a new run gets when its config names none: the precision of the process's kernel path
 * (kernel_path.h: bf16 where a bf16 unit, vdpbf16ps or AMX tiles, measures more FLOP/s than the
 * fp32 FMAs, as on AMD Zen 4 or an Intel Xeon with AMX; fp32 where none does, as on an Intel Xeon
 * whose vdpbf16ps runs at half its FMA rate and whose AMX cannot be used, or when
 * ATTNLAB_KERNEL_PATH=fp32). bf16 asked for works everywhere:
 * a bf16 unit where the CPU has one, portable loops (slowly) elsewhere. */
precision_kind precision_default(void);

#endif
