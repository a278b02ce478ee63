-- attnlab schema, version 10: where a run's numbers come from. runs.provenance is a JSON object
-- written when a run starts training (again at each resume): the attnlab version and commit that
-- trained it, the machine (CPU model, cores), the kernel path and precision its products ran on,
-- and the SHA-256 of its corpus's token file. NULL for runs from before this version; an external
-- run gets whatever its client sends.

ALTER TABLE runs ADD COLUMN provenance TEXT;
