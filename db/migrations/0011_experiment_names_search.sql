-- attnlab schema, version 11: experiment names are unique (POST and PATCH /api/experiments answer
-- 409 for a name in use), and runs and experiments are found by the words of their names, tags
-- and notes (GET /api/runs?q=, GET /api/experiments?q=).
-- Names that repeat from before: an unnamed experiment becomes "experiment", and every repeat of a
-- name after its first (by id) takes its id ("seed-blog (#7)"); the first keeps its name.

UPDATE experiments SET name = 'experiment' WHERE name = '';
UPDATE experiments SET name = name || ' (#' || id || ')'
    WHERE EXISTS (SELECT 1 FROM experiments o WHERE o.name = experiments.name AND o.id < experiments.id);
CREATE UNIQUE INDEX experiments_name ON experiments (name);

-- A run's words: its name, its tags (space-separated) and its note, kept by the triggers below.
CREATE VIRTUAL TABLE run_words USING fts5(name, tags, note, tokenize = 'unicode61');
INSERT INTO run_words (rowid, name, tags, note)
    SELECT r.id, r.name, coalesce((SELECT group_concat(t.tag, ' ') FROM run_tags t WHERE t.run_id = r.id), ''), r.note
    FROM runs r;
CREATE TRIGGER run_words_insert AFTER INSERT ON runs BEGIN
    INSERT INTO run_words (rowid, name, tags, note) VALUES (new.id, new.name, '', new.note);
END;
CREATE TRIGGER run_words_update AFTER UPDATE OF name, note ON runs BEGIN
    UPDATE run_words SET name = new.name, note = new.note WHERE rowid = new.id;
END;
CREATE TRIGGER run_words_delete AFTER DELETE ON runs BEGIN
    DELETE FROM run_words WHERE rowid = old.id;
END;
CREATE TRIGGER run_words_tag_insert AFTER INSERT ON run_tags BEGIN
    UPDATE run_words SET tags = (SELECT group_concat(tag, ' ') FROM run_tags WHERE run_id = new.run_id)
        WHERE rowid = new.run_id;
END;
CREATE TRIGGER run_words_tag_delete AFTER DELETE ON run_tags BEGIN
    UPDATE run_words SET tags = coalesce((SELECT group_concat(tag, ' ') FROM run_tags WHERE run_id = old.run_id), '')
        WHERE rowid = old.run_id;
END;

-- An experiment's words: its name.
CREATE VIRTUAL TABLE experiment_words USING fts5(name, tokenize = 'unicode61');
INSERT INTO experiment_words (rowid, name) SELECT id, name FROM experiments;
CREATE TRIGGER experiment_words_insert AFTER INSERT ON experiments BEGIN
    INSERT INTO experiment_words (rowid, name) VALUES (new.id, new.name);
END;
CREATE TRIGGER experiment_words_update AFTER UPDATE OF name ON experiments BEGIN
    UPDATE experiment_words SET name = new.name WHERE rowid = new.id;
END;
CREATE TRIGGER experiment_words_delete AFTER DELETE ON experiments BEGIN
    DELETE FROM experiment_words WHERE rowid = old.id;
END;
