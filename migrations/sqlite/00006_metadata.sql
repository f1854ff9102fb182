-- +goose Up
-- Metadata and tags (bq.WithMetadata, bq.WithTags): JSON text, an object
-- of string values and an array of strings, NULL when the job has none.
ALTER TABLE {prefix}jobs ADD COLUMN metadata TEXT;
ALTER TABLE {prefix}jobs ADD COLUMN tags TEXT;

-- Listing (Client.ListJobs), newest first: a key's jobs, finished ones
-- too, in id order; a KeyPrefix's GLOB 'p*' ranges over it too (BINARY
-- collation). Partial: unkeyed jobs pay nothing at enqueue.
CREATE INDEX {prefix}jobs_key_id ON {prefix}jobs (concurrency_key, id)
    WHERE concurrency_key IS NOT NULL;

-- +goose Down
DROP INDEX {prefix}jobs_key_id;
ALTER TABLE {prefix}jobs DROP COLUMN tags;
ALTER TABLE {prefix}jobs DROP COLUMN metadata;
