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

/* Tests: 1 makes cpu_has_avx512bf16 answer 0 (the portable paths run), 0 restores the CPU's answer. */
void cpu_disable_bf16(int on);

#endif
