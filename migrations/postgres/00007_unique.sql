-- +goose Up
-- Unique jobs (bq.Unique): unique_key is the SHA-256 (hex) of the job's
-- kind and whichever of queue, args and period bucket its spec names;
-- NULL for a job that is not unique. Enqueuers of one key take turns on
-- an advisory lock on the key's hash, then look the key up here.
ALTER TABLE {prefix}jobs ADD COLUMN unique_key TEXT;
CREATE INDEX {prefix}jobs_unique_key ON {prefix}jobs (unique_key) WHERE unique_key IS NOT NULL;

-- +goose Down
DROP INDEX {prefix}jobs_unique_key;
ALTER TABLE {prefix}jobs DROP COLUMN unique_key;
