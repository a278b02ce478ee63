-- attnlab schema for PostgreSQL, version 5: several attnlabd nodes on one database. The queue is
-- the runs table itself: a node claims a queued run (or one whose lease ran out) with
-- FOR UPDATE SKIP LOCKED, gets a fresh lease token and renews lease_until by a heartbeat; every
-- write it makes for the run names that token, so a node that lost its lease changes nothing.
-- Lease times are the database's clock (Unix seconds), never a node's.

CREATE TABLE nodes (
    id           TEXT    PRIMARY KEY,
    host         TEXT    NOT NULL DEFAULT '',
    url          TEXT    NOT NULL DEFAULT '',
    role         TEXT    NOT NULL CHECK (role IN ('api', 'worker', 'all')),
    capacity     INTEGER NOT NULL DEFAULT 0,
    pid          INTEGER,
    version      TEXT    NOT NULL DEFAULT '',
    started_at   DOUBLE PRECISION NOT NULL,
    heartbeat_at DOUBLE PRECISION NOT NULL,
    stopped_at   DOUBLE PRECISION
);

-- The node that runs (or last ran) the run, its lease and whether someone asked it to stop.
ALTER TABLE runs ADD COLUMN node_id TEXT;
ALTER TABLE runs ADD COLUMN lease_token BIGINT;
ALTER TABLE runs ADD COLUMN lease_until DOUBLE PRECISION;
ALTER TABLE runs ADD COLUMN cancel_requested INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0;
CREATE INDEX runs_claimable ON runs (status, id) WHERE status IN ('queued', 'running');

CREATE SEQUENCE lease_tokens;

-- Files in the shared artefact directory (paths relative to it) with the checksum of what was
-- written: a node loads a file only when its bytes hash to the recorded value.
CREATE TABLE artifacts (
    path       TEXT   PRIMARY KEY,
    kind       TEXT   NOT NULL CHECK (kind IN ('checkpoint', 'weights', 'corpus')),
    run_id     BIGINT REFERENCES runs (id) ON DELETE CASCADE,
    step       INTEGER,
    bytes      BIGINT NOT NULL,
    sha256     TEXT   NOT NULL,
    node_id    TEXT,
    created_at DOUBLE PRECISION NOT NULL
);
CREATE INDEX artifacts_run ON artifacts (run_id);
