-- attnlab schema for PostgreSQL: idempotency keys (see ../0012_idempotency_keys.sql).

CREATE TABLE idempotency_keys (
    key           TEXT             PRIMARY KEY,
    kind          TEXT             NOT NULL,
    run_id        BIGINT           REFERENCES runs (id) ON DELETE CASCADE,
    experiment_id BIGINT           REFERENCES experiments (id) ON DELETE CASCADE,
    request_hash  TEXT             NOT NULL,
    created_at    DOUBLE PRECISION NOT NULL
);
CREATE INDEX idempotency_keys_run ON idempotency_keys (run_id);
CREATE INDEX idempotency_keys_experiment ON idempotency_keys (experiment_id);
