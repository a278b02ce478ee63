-- attnlab schema, version 2: experiments, corpora, and what a run needs to resume.

CREATE TABLE experiments (
    id          INTEGER PRIMARY KEY,
    name        TEXT    NOT NULL DEFAULT '',
    preset      TEXT,
    base_config TEXT    NOT NULL CHECK (json_valid(base_config)),
    variants    TEXT    NOT NULL CHECK (json_valid(variants)),
    created_at  REAL    NOT NULL
);

-- Token files live in <data-dir>/corpora/<name>/tokens.u16; this table is their catalogue.
CREATE TABLE corpora (
    name       TEXT    PRIMARY KEY,
    source     TEXT    NOT NULL DEFAULT '',
    tokenizer  TEXT    NOT NULL CHECK (tokenizer IN ('gpt2', 'bytes')),
    documents  INTEGER NOT NULL DEFAULT 0,
    bytes      INTEGER NOT NULL DEFAULT 0,
    tokens     INTEGER NOT NULL DEFAULT 0,
    status     TEXT    NOT NULL CHECK (status IN ('tokenizing', 'ready', 'failed')),
    error      TEXT,
    builtin    INTEGER NOT NULL DEFAULT 0,
    created_at REAL    NOT NULL
);

ALTER TABLE runs ADD COLUMN corpus TEXT NOT NULL DEFAULT '';
-- The last step whose checkpoint is on disk: where resume starts.
ALTER TABLE runs ADD COLUMN checkpoint_step INTEGER NOT NULL DEFAULT 0;
CREATE INDEX runs_corpus ON runs (corpus);
