-- +goose Up
-- Metadata and tags (bq.WithMetadata, bq.WithTags): JSON text checked by
-- JSON_VALID, as args is, an object of string values and an array of
-- strings, NULL when the job has none.
--
-- Listing (Client.ListJobs), newest first: a key's jobs come from
-- jobs_live_key (its SHA-256, finished ones too); a KeyPrefix's LIKE 'p%'
-- ranges over the first 255 bytes of the key (InnoDB indexes no more of
-- a 4096-byte column), rechecking longer keys against the row.
ALTER TABLE {prefix}jobs
    ADD COLUMN metadata LONGTEXT NULL,
    ADD COLUMN tags LONGTEXT NULL,
    ADD CONSTRAINT {prefix}jobs_metadata_json CHECK (JSON_VALID(metadata)),
    ADD CONSTRAINT {prefix}jobs_tags_json CHECK (JSON_VALID(tags)),
    ADD INDEX {prefix}jobs_key_prefix (concurrency_key(255));

-- +goose Down
ALTER TABLE {prefix}jobs
    DROP INDEX {prefix}jobs_key_prefix,
    DROP CONSTRAINT {prefix}jobs_tags_json,
    DROP CONSTRAINT {prefix}jobs_metadata_json,
    DROP COLUMN tags,
    DROP COLUMN metadata;
