-- attnlab schema for PostgreSQL, version 6: replicates (see ../0006_replicates.sql). An experiment
-- runs every variant `replicates` times with seeds seed, seed+1, ...; a run outside an experiment,
-- or from before this version, is replicate 0 of 1.

ALTER TABLE runs ADD COLUMN replicate INTEGER NOT NULL DEFAULT 0 CHECK (replicate >= 0);
ALTER TABLE experiments ADD COLUMN replicates INTEGER NOT NULL DEFAULT 1 CHECK (replicates >= 1);
CREATE INDEX runs_experiment_replicate ON runs (experiment_id, replicate);
