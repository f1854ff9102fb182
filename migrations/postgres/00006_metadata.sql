-- +goose Up
-- Metadata and tags (bq.WithMetadata, bq.WithTags): a JSON object of
-- string values and a JSON array of strings, NULL when the job has none,
-- so an enqueue without them writes no index entry below.
ALTER TABLE {prefix}jobs ADD COLUMN metadata JSONB, ADD COLUMN tags JSONB;

-- Listing (Client.ListJobs), newest first: a key's jobs, finished ones too,
-- in id order (text_pattern_ops also serves a KeyPrefix's LIKE 'p%'), and
-- containment (@>) on metadata and tags. Partial: unkeyed jobs and jobs
-- without metadata or tags pay nothing at enqueue.
CREATE INDEX {prefix}jobs_key_id ON {prefix}jobs (concurrency_key text_pattern_ops, id)
    WHERE concurrency_key IS NOT NULL;
CREATE INDEX {prefix}jobs_metadata ON {prefix}jobs USING GIN (metadata jsonb_path_ops)
    WHERE metadata IS NOT NULL;
CREATE INDEX {prefix}jobs_tags ON {prefix}jobs USING GIN (tags jsonb_path_ops)
    WHERE tags IS NOT NULL;

-- +goose Down
DROP INDEX {prefix}jobs_tags;
DROP INDEX {prefix}jobs_metadata;
DROP INDEX {prefix}jobs_key_id;
ALTER TABLE {prefix}jobs DROP COLUMN tags, DROP COLUMN metadata;
