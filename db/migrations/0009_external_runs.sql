-- attnlab schema, version 9: runs trained elsewhere. A run's source is 'attnlab' (trained by this
-- service: queued, claimed, trained, interrupted when the service stops) or 'external' (created
-- running by POST /api/runs {"source":"external"}, its points posted by the client that trains it,
-- ended by that client; never queued, trained or interrupted here).

ALTER TABLE runs ADD COLUMN source TEXT NOT NULL DEFAULT 'attnlab' CHECK (source IN ('attnlab', 'external'));
