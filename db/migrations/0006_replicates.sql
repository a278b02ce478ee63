-- attnlab schema, version 6: replicates. An experiment runs every variant `replicates` times with
-- seeds seed, seed+1, ...; replicate i of every variant shares its seed and data order (a paired
-- design). A run outside an experiment, or from before this version, is replicate 0 of 1.

ALTER TABLE runs ADD COLUMN replicate INTEGER NOT NULL DEFAULT 0 CHECK (replicate >= 0);
ALTER TABLE experiments ADD COLUMN replicates INTEGER NOT NULL DEFAULT 1 CHECK (replicates >= 1);
CREATE INDEX runs_experiment_replicate ON runs (experiment_id, replicate);
