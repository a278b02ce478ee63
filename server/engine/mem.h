/* The engine's large blocks (parameters, gradients, activations, bf16 weight copies, kernel
 * scratch) start on a 64-byte boundary: a cache line, an AVX-512 vector, an AMX tile row. glibc
 * places a large block 16 bytes past a page's start, so every 64-byte row of a tile loaded from it
 * straddles two cache lines; measured on the AMX Xeon (2026-12-04, bench_lmhead, one thread), the
 * output layer took 474 ms on such blocks and 301 ms on aligned ones, with the same bits. */
#ifndef ENGINE_MEM_H
#define ENGINE_MEM_H

#include <stddef.h>

/* count * size zeroed bytes at a multiple of 64 (pages are touched only when written, as with
 * calloc); NULL when the size overflows or memory runs out. Free with mem_free64 only. */
void *mem_calloc64(size_t count, size_t size);
/* Frees a block of mem_calloc64; NULL is fine. */
void mem_free64(void *p);

#endif
