-- attnlab schema for PostgreSQL, version 1: runs, their tags and metric series, and probe results.
-- The same versions as the SQLite files one folder up (db/migrations/NNNN_*.sql), table for table;
-- the version reached is kept in attnlab_schema (SQLite keeps it in PRAGMA user_version).
-- Times are Unix seconds (double precision). Config and params are JSON text, checked by a cast.

CREATE TABLE runs (
    id            BIGINT PRIMARY KEY,
    name          TEXT    NOT NULL DEFAULT '',
    experiment_id BIGINT,
    variant       TEXT    NOT NULL DEFAULT '',
    config        TEXT    NOT NULL CHECK ((config::jsonb) IS NOT NULL),
    seed          BIGINT  NOT NULL,
    status        TEXT    NOT NULL CHECK (status IN
                    ('queued', 'running', 'succeeded', 'failed', 'cancelled', 'interrupted')),
    step          INTEGER NOT NULL DEFAULT 0,
    total_steps   INTEGER NOT NULL DEFAULT 0,
    note          TEXT    NOT NULL DEFAULT '',
    error         TEXT,
    created_at    DOUBLE PRECISION NOT NULL,
    started_at    DOUBLE PRECISION,
    finished_at   DOUBLE PRECISION
);
CREATE INDEX runs_status ON runs (status);
CREATE INDEX runs_experiment ON runs (experiment_id);

CREATE TABLE run_tags (
    run_id BIGINT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    tag    TEXT   NOT NULL,
    PRIMARY KEY (run_id, tag)
);
CREATE INDEX run_tags_tag ON run_tags (tag);

-- One row per (run, series, step). Series keys are e.g. "loss", "val_loss", "tau.0.3".
CREATE TABLE metrics (
    run_id    BIGINT  NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    key       TEXT    NOT NULL,
    step      INTEGER NOT NULL,
    value     DOUBLE PRECISION NOT NULL,
    wall_time DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (run_id, key, step)
);

CREATE TABLE probes (
    id          BIGINT PRIMARY KEY,
    kind        TEXT   NOT NULL,
    params      TEXT   NOT NULL CHECK ((params::jsonb) IS NOT NULL),
    seed        BIGINT,
    status      TEXT   NOT NULL CHECK (status IN ('queued', 'running', 'succeeded', 'failed')),
    result      TEXT   CHECK (result IS NULL OR (result::jsonb) IS NOT NULL),
    error       TEXT,
    created_at  DOUBLE PRECISION NOT NULL,
    finished_at DOUBLE PRECISION
);
CREATE INDEX probes_kind ON probes (kind);
