-- attnlab schema, version 4: ids are never reused. SQLite hands a deleted row's id to the next
-- insert when the table has no AUTOINCREMENT, so a client watching run 7 could find another run 7
-- after a delete. Runs, experiments and probes now take their ids from these counters.

CREATE TABLE id_counters (
    name TEXT PRIMARY KEY,
    last INTEGER NOT NULL
) WITHOUT ROWID;
INSERT INTO id_counters (name, last) SELECT 'runs', coalesce(max(id), 0) FROM runs;
INSERT INTO id_counters (name, last) SELECT 'experiments', coalesce(max(id), 0) FROM experiments;
INSERT INTO id_counters (name, last) SELECT 'probes', coalesce(max(id), 0) FROM probes;
