-- attnlab schema, version 7: task corpora. A synthetic task corpus (server/engine/tasks.h) is a pure
-- function of its kind, parameters and seed; its row records them in `task` (JSON: {"kind", "vocab",
-- "seq_len", "windows", "seed", "params": {...}, "offsets": [...]}) so its tokens and answer labels
-- can be regenerated at any time, and its tokenizer is 'task' (ids 0..vocab-1, no text).
-- SQLite cannot change a CHECK constraint in place: the table is rebuilt with the wider one.

CREATE TABLE corpora_v7 (
    name       TEXT    PRIMARY KEY,
    source     TEXT    NOT NULL DEFAULT '',
    tokenizer  TEXT    NOT NULL CHECK (tokenizer IN ('gpt2', 'bytes', 'task')),
    documents  INTEGER NOT NULL DEFAULT 0,
    bytes      INTEGER NOT NULL DEFAULT 0,
    tokens     INTEGER NOT NULL DEFAULT 0,
    status     TEXT    NOT NULL CHECK (status IN ('tokenizing', 'ready', 'failed')),
    error      TEXT,
    builtin    INTEGER NOT NULL DEFAULT 0,
    created_at REAL    NOT NULL,
    task       TEXT    CHECK (task IS NULL OR json_valid(task)),
    CHECK ((tokenizer = 'task') = (task IS NOT NULL))
);
INSERT INTO corpora_v7 (name, source, tokenizer, documents, bytes, tokens, status, error, builtin, created_at)
    SELECT name, source, tokenizer, documents, bytes, tokens, status, error, builtin, created_at FROM corpora;
DROP TABLE corpora;
ALTER TABLE corpora_v7 RENAME TO corpora;
