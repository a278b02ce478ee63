/* The arithmetic of a run's matrix products: fp32 throughout, or bf16 mixed precision (bf16 inputs,
 * fp32 accumulation, fp32 master weights and optimiser state; see bf16.h). A run records its
 * precision in its config, so a resumed run computes as the first attempt did. */
#ifndef ENGINE_PRECISION_H
#define ENGINE_PRECISION_H

typedef enum { PRECISION_FP32 = 0, PRECISION_BF16 = 1 } precision_kind;

const char *precision_name(precision_kind p);          /* "fp32", "bf16" */
int precision_parse(const char *s, precision_kind *p); /* 0 ok, -1 unknown (p untouched) */
/* What a new run gets when its config names none: bf16 where the CPU running this process has
 * AVX-512 BF16 and its bf16 dot product delivers more FLOP/s than its fp32 FMAs (cpu.h, asked at
 * run time: true of AMD Zen 4, not of the Intel Emerald Rapids measured here), else fp32. bf16
 * asked for works everywhere: vdpbf16ps where the CPU has it, portable loops (slowly) elsewhere. */
precision_kind precision_default(void);

#endif
