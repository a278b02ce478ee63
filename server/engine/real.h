/* The engine's scalar type. One switch for the whole numerical engine: float by default,
 * double when compiled with -DENGINE_F64 (the same sources are built twice; the double build
 * exists so that gradients can be checked against finite differences to ~1e-7). */
#ifndef ENGINE_REAL_H
#define ENGINE_REAL_H

#include <math.h>

#ifdef ENGINE_F64
typedef double real;
#define REAL_IS_DOUBLE 1
#define REAL_DTYPE "F64"
#define rexp exp
#define rlog log
#define rtanh tanh
#define rsqrt sqrt
#else
typedef float real;
#define REAL_IS_DOUBLE 0
#define REAL_DTYPE "F32"
#define rexp expf
#define rlog logf
#define rtanh tanhf
#define rsqrt sqrtf
#endif

#endif
