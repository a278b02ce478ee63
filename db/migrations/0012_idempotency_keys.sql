-- attnlab schema: idempotency keys (numbered 0012; 0011 is another change's). A request that
-- creates a run or an experiment may carry an Idempotency-Key header: the key is stored in the
-- transaction that creates, with what it created and a hash of the request, so that a retry whose
-- first answer was lost (a kill, a dropped connection) gets that first answer, not a duplicate.
-- A key goes with what it created (deleting the run or the experiment frees it).

CREATE TABLE idempotency_keys (
    key           TEXT    PRIMARY KEY,
    kind          TEXT    NOT NULL,
    run_id        INTEGER REFERENCES runs (id) ON DELETE CASCADE,
    experiment_id INTEGER REFERENCES experiments (id) ON DELETE CASCADE,
    request_hash  TEXT    NOT NULL,
    created_at    REAL    NOT NULL
);
CREATE INDEX idempotency_keys_run ON idempotency_keys (run_id);
CREATE INDEX idempotency_keys_experiment ON idempotency_keys (experiment_id);
