-- attnlab schema, version 5: nodes, run leases and artefact checksums (see
-- db/migrations/pg/0005_nodes_leases.sql: several nodes sharing a PostgreSQL database). With the
-- embedded SQLite file there is one node; it records itself and its runs' leases the same way.

CREATE TABLE nodes (
    id           TEXT    PRIMARY KEY,
    host         TEXT    NOT NULL DEFAULT '',
    url          TEXT    NOT NULL DEFAULT '',
    role         TEXT    NOT NULL CHECK (role IN ('api', 'worker', 'all')),
    capacity     INTEGER NOT NULL DEFAULT 0,
    pid          INTEGER,
    version      TEXT    NOT NULL DEFAULT '',
    started_at   REAL    NOT NULL,
    heartbeat_at REAL    NOT NULL,
    stopped_at   REAL
) WITHOUT ROWID;

ALTER TABLE runs ADD COLUMN node_id TEXT;
ALTER TABLE runs ADD COLUMN lease_token INTEGER;
ALTER TABLE runs ADD COLUMN lease_until REAL;
ALTER TABLE runs ADD COLUMN cancel_requested INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0;

INSERT INTO id_counters (name, last) VALUES ('leases', 0);

CREATE TABLE artifacts (
    path       TEXT    PRIMARY KEY,
    kind       TEXT    NOT NULL CHECK (kind IN ('checkpoint', 'weights', 'corpus')),
    run_id     INTEGER REFERENCES runs (id) ON DELETE CASCADE,
    step       INTEGER,
    bytes      INTEGER NOT NULL,
    sha256     TEXT    NOT NULL,
    node_id    TEXT,
    created_at REAL    NOT NULL
) WITHOUT ROWID;
CREATE INDEX artifacts_run ON artifacts (run_id);
