-- attnlab schema, version 3: probe results as tables (the "RoPE score tables"), with what is
-- needed to answer a repeated request from the store.

ALTER TABLE probes ADD COLUMN run_id INTEGER REFERENCES runs (id) ON DELETE CASCADE;
-- The resolved parameters in canonical form (sorted keys, defaults filled), plus the model's
-- checkpoint step for model probes: equal keys mean an equal result.
ALTER TABLE probes ADD COLUMN cache_key TEXT;
ALTER TABLE probes ADD COLUMN duration_ms REAL;
CREATE INDEX probes_cache ON probes (kind, cache_key);

CREATE TABLE probe_tables (
    probe_id INTEGER NOT NULL REFERENCES probes (id) ON DELETE CASCADE,
    idx      INTEGER NOT NULL,
    name     TEXT    NOT NULL,
    columns  TEXT    NOT NULL CHECK (json_valid(columns)),
    rows     TEXT    NOT NULL CHECK (json_valid(rows)),
    PRIMARY KEY (probe_id, idx)
) WITHOUT ROWID;
