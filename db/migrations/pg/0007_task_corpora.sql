-- attnlab schema for PostgreSQL, version 7: task corpora (see ../0007_task_corpora.sql). The row of
-- a synthetic task corpus records its kind, parameters and seed in `task` (JSON) and its tokenizer
-- is 'task'.

ALTER TABLE corpora DROP CONSTRAINT IF EXISTS corpora_tokenizer_check;
ALTER TABLE corpora ADD CONSTRAINT corpora_tokenizer_check CHECK (tokenizer IN ('gpt2', 'bytes', 'task'));
ALTER TABLE corpora ADD COLUMN task TEXT CHECK (task IS NULL OR (task::jsonb) IS NOT NULL);
ALTER TABLE corpora ADD CONSTRAINT corpora_task_kind_check CHECK ((tokenizer = 'task') = (task IS NOT NULL));
