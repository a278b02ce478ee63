/* SHA-256 against the FIPS 180-4 examples and a file read in chunks. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../support/harness.h"
#include "../support/test.h"
#include "util/hash.h"

static void digest(const char *text, size_t len, size_t piece, char hex[65]) {
    hash_sha256 c;
    hash_sha256_init(&c);
    for (size_t at = 0; at < len; at += piece) hash_sha256_update(&c, text + at, len - at < piece ? len - at : piece);
    hash_sha256_hex(&c, hex);
}

TEST(known_digests) {
    char hex[65];
    digest("", 0, 1, hex);
    CHECK(!strcmp(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"));
    digest("abc", 3, 1, hex);
    CHECK(!strcmp(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"));
    const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    for (size_t piece = 1; piece <= 64; piece *= 3) {
        digest(two, strlen(two), piece, hex);
        CHECK_MSG(!strcmp(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"), "in pieces of %zu",
                  piece);
    }
}

TEST(a_file_is_hashed_whole) {
    char dir[256], path[320];
    CHECK(harness_tempdir(dir, sizeof dir) == 0);
    snprintf(path, sizeof path, "%s/million-a", dir);
    FILE *f = fopen(path, "wb");
    CHECK(f);
    for (int i = 0; i < 1000000; i++) fputc('a', f);
    fclose(f);
    char hex[65];
    uint64_t size = 0;
    CHECK(hash_file_sha256(path, hex, &size) == 0);
    CHECK_EQ_INT(size, 1000000);
    CHECK(!strcmp(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"));
    CHECK(hash_file_sha256("/nonexistent/file", hex, NULL) == -1);
}

int main(void) {
    RUN(known_digests);
    RUN(a_file_is_hashed_whole);
    printf("# again with the portable code only\n");
    hash_sha256_force_portable(1);
    RUN(known_digests);
    RUN(a_file_is_hashed_whole);
    return test_summary();
}
