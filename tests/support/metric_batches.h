/* Random metric batches for the store tests of both backends (test_store.c, test_store_pg.c), with
 * a model of what each series should hold after them. */
#ifndef ATTNLAB_TEST_METRIC_BATCHES_H
#define ATTNLAB_TEST_METRIC_BATCHES_H

#include <stddef.h>

#include "store/store.h"

#define METRIC_BATCH_SERIES 4 /* loss, val_loss, lr, and tau.0.0 with tau.0.1 */
#define METRIC_BATCH_MAX_STEP 400

/* Two runs (set run[] before the first batch) and, per run and series, the next step to append
 * and the value each step holds (stored: it holds one). Zero it before use. */
typedef struct {
    long long run[2];
    int next[2][METRIC_BATCH_SERIES];
    unsigned char stored[2][METRIC_BATCH_SERIES][METRIC_BATCH_MAX_STEP];
    double value[2][METRIC_BATCH_SERIES][METRIC_BATCH_MAX_STEP];
} series_model;

/* A random batch of at most cap points over the model's two runs, the model updated: steps appended
 * (some skipped, to arrive late), rewritten with the same value (a bit-identical resume) or
 * another, twice in one batch, NaN (no point); values with ties, and with signed_zero 0 and -0
 * among them. The tau.* series are written together, as training writes them. One fixed
 * pseudo-random sequence per process. Returns the point count. */
size_t metric_batch_random(series_model *m, store_metric *pts, size_t cap, int signed_zero);

#endif
