-- attnlab schema for PostgreSQL, version 11: experiment names are unique, and runs and experiments
-- are found by the words of their names, tags and notes (see ../0011_experiment_names_search.sql).
-- PostgreSQL's full-text search reads the words from the rows themselves (to_tsvector('simple',
-- …) in the store's queries), so nothing more is kept for it.

UPDATE experiments SET name = 'experiment' WHERE name = '';
UPDATE experiments e SET name = e.name || ' (#' || e.id || ')'
    WHERE EXISTS (SELECT 1 FROM experiments o WHERE o.name = e.name AND o.id < e.id);
CREATE UNIQUE INDEX experiments_name ON experiments (name);
