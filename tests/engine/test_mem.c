/* The engine's large blocks start on 64 bytes (mem.h): every size, zeroed, writable to its end (the
 * sanitizer builds check the bounds), overflow refused; and the model's own blocks use them. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../support/test.h"
#include "mem.h"
#include "model.h"

TEST(blocks_start_on_64_bytes_zeroed_and_writable) {
    const size_t counts[] = {1, 3, 15, 16, 17, 63, 64, 65, 4095, 4096, 100000, (size_t)5 << 20};
    const size_t sizes[] = {1, 2, 4, 8};
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++)
        for (size_t j = 0; j < sizeof sizes / sizeof sizes[0]; j++) {
            size_t n = counts[i] * sizes[j];
            unsigned char *p = mem_calloc64(counts[i], sizes[j]);
            CHECK_MSG(p != NULL, "%zu x %zu", counts[i], sizes[j]);
            if (!p) continue;
            CHECK_MSG((uintptr_t)p % 64 == 0, "%zu x %zu at %p", counts[i], sizes[j], (void *)p);
            size_t nonzero = 0;
            for (size_t k = 0; k < n; k++) nonzero += p[k] != 0;
            CHECK_EQ_INT((long)nonzero, 0);
            memset(p, 0xa5, n);
            mem_free64(p);
        }
}

TEST(overflow_is_refused_and_null_frees) {
    CHECK(mem_calloc64(SIZE_MAX / 2, 4) == NULL);
    CHECK(mem_calloc64(SIZE_MAX - 10, 1) == NULL);
    mem_free64(NULL);
}

TEST(the_models_blocks_are_aligned) {
    model_config c;
    model_config_defaults(&c);
    c.n_layer = 1;
    c.n_head = 2;
    c.d_model = 16;
    c.seq_len = 8;
    c.vocab = 37;
    model *m = NULL;
    engine_error err;
    CHECK(model_new(&m, &c, 3, 1, 1, &err) == ENGINE_OK);
    if (!m) return;
    CHECK((uintptr_t)model_params_read(m) % 64 == 0);
    CHECK((uintptr_t)model_grads(m) % 64 == 0);
    model_free(m);
}

int main(void) {
    RUN(blocks_start_on_64_bytes_zeroed_and_writable);
    RUN(overflow_is_refused_and_null_frees);
    RUN(the_models_blocks_are_aligned);
    return test_summary();
}
