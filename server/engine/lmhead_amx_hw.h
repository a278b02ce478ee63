/* The tile interface of lmhead_amx_kernels.h on the AMX intrinsics (x86-64, GCC): included before
 * each hardware instantiation of the kernels, by lmhead.c (the engine's) and by bench_amx.c (which
 * builds them a second time with empty epilogues, to time the products alone). Defines
 * LMHEAD_HAVE_AMX where it applies; the includer defines AMX_SFX and the epilogues. Engine-internal. */
#ifndef ENGINE_LMHEAD_AMX_HW_H
#define ENGINE_LMHEAD_AMX_HW_H

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define LMHEAD_HAVE_AMX 1
#define AMX_TGT __attribute__((target("amx-tile,amx-bf16")))
#define AMX_BEGIN() _tile_loadconfig(lmhead_amx_config)
#define AMX_ZERO(t) _tile_zero(t)
#define AMX_LOAD(t, p, stride) _tile_loadd(t, p, stride)
#define AMX_STORE(t, p, stride) _tile_stored(t, p, stride)
#define AMX_DP(c, a, b) _tile_dpbf16ps(c, a, b)
#define AMX_END() _tile_release()
#define AMX_PREFETCH(p) _mm_prefetch((const char *)(p), _MM_HINT_T0)
#endif

#endif
