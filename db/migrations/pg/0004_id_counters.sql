-- attnlab schema for PostgreSQL, version 4: ids are never reused, taken from these counters inside
-- the inserting transaction (as in the SQLite schema).

CREATE TABLE id_counters (
    name TEXT PRIMARY KEY,
    last BIGINT NOT NULL
);
INSERT INTO id_counters (name, last) SELECT 'runs', coalesce(max(id), 0) FROM runs;
INSERT INTO id_counters (name, last) SELECT 'experiments', coalesce(max(id), 0) FROM experiments;
INSERT INTO id_counters (name, last) SELECT 'probes', coalesce(max(id), 0) FROM probes;
