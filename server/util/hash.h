/* SHA-256 (FIPS 180-4), for content checksums of files the service writes and reads back. */
#ifndef ATTNLAB_HASH_H
#define ATTNLAB_HASH_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint32_t h[8];
    uint64_t bytes;
    unsigned char block[64];
    size_t used;
} hash_sha256;

void hash_sha256_init(hash_sha256 *c);
void hash_sha256_update(hash_sha256 *c, const void *data, size_t len);
/* Writes the digest as 64 lowercase hex digits and a NUL into hex. */
void hash_sha256_hex(hash_sha256 *c, char hex[65]);

/* Uses only the portable code even where the CPU has the SHA extensions (for tests: both paths
 * must give the same digests). Not thread-safe: call before hashing starts. */
void hash_sha256_force_portable(int on);

/* The SHA-256 of a whole file as hex, and its size (may be NULL). 0, or -1 with errno set when
 * it cannot be read. */
int hash_file_sha256(const char *path, char hex[65], uint64_t *size);

#endif
