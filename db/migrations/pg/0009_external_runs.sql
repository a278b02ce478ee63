-- attnlab schema for PostgreSQL, version 9: runs trained elsewhere (see ../0009_external_runs.sql).
-- An external run is created running without a lease, so no node claims it, and no node's start
-- or takeover interrupts it.

ALTER TABLE runs ADD COLUMN source TEXT NOT NULL DEFAULT 'attnlab' CHECK (source IN ('attnlab', 'external'));
