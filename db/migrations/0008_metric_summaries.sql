-- attnlab schema, version 8: a summary row per (run, series), kept by store_metrics_insert in the
-- transaction that writes the series' points (the rule: server/store/common/store_summary.h), so that the runs
-- list's brief, GET /api/runs/{id}/summary and the loss orders of the runs list read one row per
-- series instead of every point. Deleted with the run. Filled here for the points already stored.
--   count, last_step (the highest step), last_value (its value), min_value, min_step (the first step
--   holding the minimum), max_value, sum (the values summed in step order; NULL: not a number) and
--   sum_err (the compensation term of SQLite 3.43's sum(); 0 from this migration).

CREATE TABLE metric_summaries (
    run_id     INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    key        TEXT    NOT NULL,
    count      INTEGER NOT NULL,
    last_step  INTEGER NOT NULL,
    last_value REAL    NOT NULL,
    min_value  REAL    NOT NULL,
    min_step   INTEGER NOT NULL,
    max_value  REAL    NOT NULL,
    sum        REAL,
    sum_err    REAL,
    PRIMARY KEY (run_id, key)
) WITHOUT ROWID;

INSERT INTO metric_summaries (run_id, key, count, last_step, last_value, min_value, min_step, max_value, sum, sum_err)
    SELECT m.run_id, m.key, count(*), max(m.step),
           (SELECT l.value FROM metrics l WHERE l.run_id = m.run_id AND l.key = m.key ORDER BY l.step DESC LIMIT 1),
           min(m.value),
           (SELECT min(s.step) FROM metrics s WHERE s.run_id = m.run_id AND s.key = m.key AND s.value = min(m.value)),
           max(m.value), sum(m.value), 0.0
    FROM metrics m GROUP BY m.run_id, m.key;
