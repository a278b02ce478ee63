#include "mem.h"

#include <stdint.h>
#include <stdlib.h>

/* calloc's block, 64 bytes longer; the returned address is the first multiple of 64 past its start
 * (malloc aligns to 16, so at least 16 bytes lie between), and the word just below it holds the
 * block's own address for mem_free64. */
void *mem_calloc64(size_t count, size_t size) {
    if (size && count > (SIZE_MAX - 64) / size) return NULL;
    char *raw = calloc(count * size + 64, 1);
    if (!raw) return NULL;
    char *p = raw + (64 - (uintptr_t)raw % 64);
    ((void **)p)[-1] = raw;
    return p;
}

void mem_free64(void *p) {
    if (p) free(((void **)p)[-1]);
}
