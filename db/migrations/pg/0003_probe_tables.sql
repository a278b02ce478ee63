-- attnlab schema for PostgreSQL, version 3: probe results as tables, with what is needed to answer
-- a repeated request from the store.

ALTER TABLE probes ADD COLUMN run_id BIGINT REFERENCES runs (id) ON DELETE CASCADE;
ALTER TABLE probes ADD COLUMN cache_key TEXT;
ALTER TABLE probes ADD COLUMN duration_ms DOUBLE PRECISION;
CREATE INDEX probes_cache ON probes (kind, cache_key);

CREATE TABLE probe_tables (
    probe_id BIGINT  NOT NULL REFERENCES probes (id) ON DELETE CASCADE,
    idx      INTEGER NOT NULL,
    name     TEXT    NOT NULL,
    columns  TEXT    NOT NULL CHECK ((columns::jsonb) IS NOT NULL),
    rows     TEXT    NOT NULL CHECK ((rows::jsonb) IS NOT NULL),
    PRIMARY KEY (probe_id, idx)
);
