-- attnlab schema for PostgreSQL, version 8: a summary row per (run, series), kept in the
-- transaction that writes the series' points (see ../0008_metric_summaries.sql and
-- server/store/common/store_summary.h). sum: the values summed in step order; sum_err is 0 here (SQLite's
-- compensation term, unused on PostgreSQL).

CREATE TABLE metric_summaries (
    run_id     BIGINT  NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    key        TEXT    NOT NULL,
    count      BIGINT  NOT NULL,
    last_step  INTEGER NOT NULL,
    last_value DOUBLE PRECISION NOT NULL,
    min_value  DOUBLE PRECISION NOT NULL,
    min_step   INTEGER NOT NULL,
    max_value  DOUBLE PRECISION NOT NULL,
    sum        DOUBLE PRECISION NOT NULL,
    sum_err    DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (run_id, key)
);

INSERT INTO metric_summaries (run_id, key, count, last_step, last_value, min_value, min_step, max_value, sum, sum_err)
    SELECT m.run_id, m.key, count(*), max(m.step),
           (SELECT l.value FROM metrics l WHERE l.run_id = m.run_id AND l.key = m.key ORDER BY l.step DESC LIMIT 1),
           min(m.value),
           (SELECT min(s.step) FROM metrics s WHERE s.run_id = m.run_id AND s.key = m.key AND s.value = min(m.value)),
           max(m.value), sum(m.value ORDER BY m.step), 0
    FROM metrics m GROUP BY m.run_id, m.key;
