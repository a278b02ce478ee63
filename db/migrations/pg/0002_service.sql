-- attnlab schema for PostgreSQL, version 2: experiments, corpora, and what a run needs to resume.

CREATE TABLE experiments (
    id          BIGINT PRIMARY KEY,
    name        TEXT   NOT NULL DEFAULT '',
    preset      TEXT,
    base_config TEXT   NOT NULL CHECK ((base_config::jsonb) IS NOT NULL),
    variants    TEXT   NOT NULL CHECK ((variants::jsonb) IS NOT NULL),
    created_at  DOUBLE PRECISION NOT NULL
);

-- Token files live in <artefacts>/corpora/<name>/tokens.u16; this table is their catalogue.
CREATE TABLE corpora (
    name       TEXT    PRIMARY KEY,
    source     TEXT    NOT NULL DEFAULT '',
    tokenizer  TEXT    NOT NULL CHECK (tokenizer IN ('gpt2', 'bytes')),
    documents  BIGINT  NOT NULL DEFAULT 0,
    bytes      BIGINT  NOT NULL DEFAULT 0,
    tokens     BIGINT  NOT NULL DEFAULT 0,
    status     TEXT    NOT NULL CHECK (status IN ('tokenizing', 'ready', 'failed')),
    error      TEXT,
    builtin    INTEGER NOT NULL DEFAULT 0,
    created_at DOUBLE PRECISION NOT NULL
);

ALTER TABLE runs ADD COLUMN corpus TEXT NOT NULL DEFAULT '';
-- The last step whose checkpoint is on disk: where resume starts.
ALTER TABLE runs ADD COLUMN checkpoint_step INTEGER NOT NULL DEFAULT 0;
CREATE INDEX runs_corpus ON runs (corpus);
