-- attnlab schema for PostgreSQL, version 10: where a run's numbers come from (see
-- ../0010_provenance.sql).

ALTER TABLE runs ADD COLUMN provenance TEXT;
