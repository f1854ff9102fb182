-- +goose Up
-- Several concurrency keys per job (bq.MaxConcurrencyKeys). A multi-key
-- job keeps its first key in concurrency_key and the rest, with their
-- specs, as JSON in more_keys (NULL for a job with one key or none).
-- job_keys names every key of a multi-key job, so the job counts as a
-- holder of each and a semaphore its blocked job still needs is not
-- deleted as idle. Rows go with their jobs (ON DELETE CASCADE).
--
-- semaphores.multi counts the multi-key jobs waiting in the key's line;
-- while above 0 the line is promoted head by head (package semaphore),
-- never by the set-wise release.
ALTER TABLE {prefix}jobs ADD COLUMN more_keys TEXT;
ALTER TABLE {prefix}semaphores ADD COLUMN multi INTEGER NOT NULL DEFAULT 0;
CREATE TABLE {prefix}job_keys (
    job_id BIGINT NOT NULL REFERENCES {prefix}jobs (id) ON DELETE CASCADE,
    key    TEXT   NOT NULL,
    PRIMARY KEY (job_id, key)
);
CREATE INDEX {prefix}job_keys_key ON {prefix}job_keys (key, job_id);

-- +goose Down
DROP TABLE {prefix}job_keys;
ALTER TABLE {prefix}semaphores DROP COLUMN multi;
ALTER TABLE {prefix}jobs DROP COLUMN more_keys;
