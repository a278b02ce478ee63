-- attnlab schema, version 1: runs, their tags and metric series, and probe results.
-- Times are Unix seconds (REAL). Config and params are JSON text, checked by json_valid.

CREATE TABLE runs (
    id            INTEGER PRIMARY KEY,
    name          TEXT    NOT NULL DEFAULT '',
    experiment_id INTEGER,
    variant       TEXT    NOT NULL DEFAULT '',
    config        TEXT    NOT NULL CHECK (json_valid(config)),
    seed          INTEGER NOT NULL,
    status        TEXT    NOT NULL CHECK (status IN
                    ('queued', 'running', 'succeeded', 'failed', 'cancelled', 'interrupted')),
    step          INTEGER NOT NULL DEFAULT 0,
    total_steps   INTEGER NOT NULL DEFAULT 0,
    note          TEXT    NOT NULL DEFAULT '',
    error         TEXT,
    created_at    REAL    NOT NULL,
    started_at    REAL,
    finished_at   REAL
);
CREATE INDEX runs_status ON runs (status);
CREATE INDEX runs_experiment ON runs (experiment_id);

CREATE TABLE run_tags (
    run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    tag    TEXT    NOT NULL,
    PRIMARY KEY (run_id, tag)
) WITHOUT ROWID;
CREATE INDEX run_tags_tag ON run_tags (tag);

-- One row per (run, series, step). Series keys are e.g. "loss", "val_loss", "tau.0.3".
CREATE TABLE metrics (
    run_id    INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    key       TEXT    NOT NULL,
    step      INTEGER NOT NULL,
    value     REAL    NOT NULL,
    wall_time REAL    NOT NULL,
    PRIMARY KEY (run_id, key, step)
) WITHOUT ROWID;

CREATE TABLE probes (
    id          INTEGER PRIMARY KEY,
    kind        TEXT    NOT NULL,
    params      TEXT    NOT NULL CHECK (json_valid(params)),
    seed        INTEGER,
    status      TEXT    NOT NULL CHECK (status IN ('queued', 'running', 'succeeded', 'failed')),
    result      TEXT    CHECK (result IS NULL OR json_valid(result)),
    error       TEXT,
    created_at  REAL    NOT NULL,
    finished_at REAL
);
CREATE INDEX probes_kind ON probes (kind);
