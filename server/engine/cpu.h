/* What the CPU this process runs on can do, asked at run time (cpuid through the compiler's
 * builtins), so that one binary picks its kernels on whichever machine it lands: code that needs
 * an instruction set beyond the build's is compiled with a target attribute and only called when
 * these say so. Thread-safe; the answers are computed once. Engine-internal. */
#ifndef ENGINE_CPU_H
#define ENGINE_CPU_H

/* 1 when AVX-512 F, BW, VL and BF16 (vdpbf16ps, vcvtne2ps2bf16) can be used: the CPU has them and
 * the OS saves the zmm state. 0 while cpu_disable_bf16(1) is in force (tests of the fallbacks). */
int cpu_has_avx512bf16(void);

/* 1 when the bf16 dot product delivers more FLOP/s than fp32 FMAs on this CPU: true of AMD Zen 4
 * (vdpbf16ps zmm issues as often as vfmadd), false where it issues at a quarter of the FMA rate
 * (an Intel Emerald Rapids measured here: 0.5 vs 2 per cycle, half the FLOP/s of fp32). Measured
 * once per process in about 4 ms, both loops interleaved, best of 20 rounds each; 0 without
 * cpu_has_avx512bf16. */
int cpu_bf16_dot_is_fast(void);

/* Peak FLOP/s of one thread for 16-lane fp32 FMAs and for vdpbf16ps (0 without it), measured over
 * about `seconds` each, interleaved in 8 rounds; the median round of each. For benchmarks. */
void cpu_measure_peaks(double seconds, double *fma_flops, double *bf16_flops);

/* Tests: 1 makes cpu_has_avx512bf16 and cpu_has_amx_bf16 answer 0 (the portable paths run), 0
 * restores the CPU's answers. */
void cpu_disable_bf16(int on);

/* 1 when AMX tiles with BF16 (TDPBF16PS) can be used: the CPU has AMX-TILE and AMX-BF16, the OS
 * enables the tile state in XCR0, and the kernel granted this process the tile data state
 * (arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA), asked once per process). 0 while
 * cpu_disable_bf16(1) is in force. */
int cpu_has_amx_bf16(void);
/* Why cpu_has_amx_bf16 answers 0, in words ("CPU lacks AMX-BF16", "the kernel refused the AMX tile
 * state: ..."), or NULL when it answers 1. */
const char *cpu_amx_missing(void);
/* Peak FLOP/s of one thread for TDPBF16PS (16 x 16 x 32 pairs per instruction, four independent
 * accumulator tiles), measured over about `seconds`, the median of 8 rounds; 0 without AMX. */
double cpu_measure_amx_peak(double seconds);
/* One thread's best FLOP/s of each unit over `rounds` short interleaved rounds (~0.1 ms each after
 * a ~2 ms warm-up), the way the kernel path is chosen: load only ever slows a loop down, so the
 * best round is the unit's rate. A unit the CPU lacks gets 0. */
void cpu_quick_peaks(int rounds, double *fma_flops, double *bf16_flops, double *amx_flops);

#endif
