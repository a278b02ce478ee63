#include "util/hash.h"

#include <cpuid.h>
#include <errno.h>
#include <fcntl.h>
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const uint32_t K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

static uint32_t ror(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

__attribute__((no_sanitize("address", "undefined"))) static void compress(uint32_t h[8], const unsigned char *p) {
    uint32_t w[64];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = ror(w[i - 15], 7) ^ ror(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = ror(w[i - 2], 17) ^ ror(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], k = h[7];
    for (int i = 0; i < 64; i++) {
        uint32_t t1 = k + (ror(e, 6) ^ ror(e, 11) ^ ror(e, 25)) + ((e & f) ^ (~e & g)) + K[i] + w[i];
        uint32_t t2 = (ror(a, 2) ^ ror(a, 13) ^ ror(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        k = g;
        g = f;
        f = e;
        e = d + t1;
        d = c;
        c = b;
        b = a;
        a = t1 + t2;
    }
    h[0] += a;
    h[1] += b;
    h[2] += c;
    h[3] += d;
    h[4] += e;
    h[5] += f;
    h[6] += g;
    h[7] += k;
}

/* The same compression with the x86 SHA extensions: several times faster, which is what keeps
 * hashing a checkpoint of hundreds of MB cheap. (The round constants plus message words go in
 * four at a time; the state is held as ABEF and CDGH, as sha256rnds2 wants it.) */
/* Hot loops over one block and local state: left out of the sanitizers, which made hashing a
 * checkpoint take seconds in the instrumented build. */
#define HASH_HOT __attribute__((no_sanitize("address", "undefined")))

HASH_HOT __attribute__((target("sha,sse4.1,ssse3"))) static void compress_shani(uint32_t h[8], const unsigned char *p,
                                                                                size_t blocks) {
#ifdef __AVX__
    /* sha256rnds2 and its kin have only legacy SSE encodings: with the upper halves of the vector
     * registers dirty (AVX code before), each of them pays a transition penalty, 50x in all. */
    _mm256_zeroupper();
#endif
    const __m128i mask = _mm_set_epi64x(0x0c0d0e0f08090a0bULL, 0x0405060700010203ULL);
    __m128i tmp = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)&h[0]), 0xB1); /* CDAB */
    __m128i s1 = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)&h[4]), 0x1B);  /* EFGH */
    __m128i s0 = _mm_alignr_epi8(tmp, s1, 8);                                       /* ABEF */
    s1 = _mm_blend_epi16(s1, tmp, 0xF0);                                            /* CDGH */
    for (; blocks; blocks--, p += 64) {
        __m128i abef = s0, cdgh = s1, msg[4];
        for (int j = 0; j < 16; j++) {
            if (j < 4) {
                msg[j] = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(p + 16 * j)), mask);
            } else { /* W[4j..4j+3] from the four groups before it */
                __m128i m = _mm_sha256msg1_epu32(msg[j & 3], msg[(j + 1) & 3]);
                m = _mm_add_epi32(m, _mm_alignr_epi8(msg[(j + 3) & 3], msg[(j + 2) & 3], 4));
                msg[j & 3] = _mm_sha256msg2_epu32(m, msg[(j + 3) & 3]);
            }
            __m128i wk = _mm_add_epi32(msg[j & 3], _mm_loadu_si128((const __m128i *)&K[4 * j]));
            s1 = _mm_sha256rnds2_epu32(s1, s0, wk);
            s0 = _mm_sha256rnds2_epu32(s0, s1, _mm_shuffle_epi32(wk, 0x0E));
        }
        s0 = _mm_add_epi32(s0, abef);
        s1 = _mm_add_epi32(s1, cdgh);
    }
    tmp = _mm_shuffle_epi32(s0, 0x1B);   /* FEBA */
    s1 = _mm_shuffle_epi32(s1, 0xB1);    /* DCHG */
    s0 = _mm_blend_epi16(tmp, s1, 0xF0); /* DCBA */
    s1 = _mm_alignr_epi8(s1, tmp, 8);    /* HGFE */
    _mm_storeu_si128((__m128i *)&h[0], s0);
    _mm_storeu_si128((__m128i *)&h[4], s1);
}

static int portable_only;

void hash_sha256_force_portable(int on) { portable_only = on; }

static int have_shani(void) {
    static int known = -1;
    if (known < 0) {
        unsigned a, b, c, d;
        int sse41 = __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 19)) && (c & (1u << 9));
        int sha = __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & (1u << 29));
        known = sse41 && sha;
    }
    return known;
}

static void compress_blocks(uint32_t h[8], const unsigned char *p, size_t blocks) {
    if (!portable_only && have_shani()) {
        compress_shani(h, p, blocks);
        return;
    }
    for (; blocks; blocks--, p += 64) compress(h, p);
}

void hash_sha256_init(hash_sha256 *c) {
    static const uint32_t init[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                     0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(c->h, init, sizeof init);
    c->bytes = 0;
    c->used = 0;
}

void hash_sha256_update(hash_sha256 *c, const void *data, size_t len) {
    const unsigned char *p = data;
    c->bytes += len;
    if (c->used) {
        size_t take = 64 - c->used < len ? 64 - c->used : len;
        memcpy(c->block + c->used, p, take);
        c->used += take;
        p += take;
        len -= take;
        if (c->used < 64) return;
        compress_blocks(c->h, c->block, 1);
        c->used = 0;
    }
    size_t blocks = len / 64;
    compress_blocks(c->h, p, blocks);
    p += blocks * 64;
    len -= blocks * 64;
    memcpy(c->block, p, len);
    c->used = len;
}

void hash_sha256_hex(hash_sha256 *c, char hex[65]) {
    uint64_t bits = c->bytes * 8;
    unsigned char pad[72] = {0x80};
    size_t n = (c->used < 56 ? 56 : 120) - c->used;
    for (int i = 0; i < 8; i++) pad[n + (size_t)i] = (unsigned char)(bits >> (56 - 8 * i));
    hash_sha256_update(c, pad, n + 8);
    for (int i = 0; i < 8; i++) snprintf(hex + 8 * i, 9, "%08x", c->h[i]);
}

int hash_file_sha256(const char *path, char hex[65], uint64_t *size) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    enum { CHUNK = 1 << 20 };
    unsigned char *buf = malloc(CHUNK);
    if (!buf) {
        close(fd);
        errno = ENOMEM;
        return -1;
    }
    hash_sha256 c;
    hash_sha256_init(&c);
    ssize_t n;
    while ((n = read(fd, buf, CHUNK)) > 0 || (n < 0 && errno == EINTR))
        if (n > 0) hash_sha256_update(&c, buf, (size_t)n);
    int e = errno;
    free(buf);
    close(fd);
    if (n < 0) {
        errno = e;
        return -1;
    }
    if (size) *size = c.bytes;
    hash_sha256_hex(&c, hex);
    return 0;
}
