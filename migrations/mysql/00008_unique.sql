-- +goose Up
-- Unique jobs (bq.Unique): unique_key is the SHA-256 (hex) of the job's
-- kind and whichever of queue, args and period bucket its spec names;
-- NULL for a job that is not unique.
--
-- unique_locks serialises the enqueuers of a key: each upserts the row of
-- its key's stripe (the first two bytes of the hash) with INSERT ... ON
-- DUPLICATE KEY UPDATE, which X-locks the row until its transaction ends,
-- then reads the key's jobs with a locking read. Stripes bound the table
-- to 65,536 rows, so no row ever needs pruning; two keys sharing a stripe
-- only take turns.
ALTER TABLE {prefix}jobs ADD COLUMN unique_key VARBINARY(64) NULL,
    ADD INDEX {prefix}jobs_unique_key (unique_key);
CREATE TABLE {prefix}unique_locks (
    stripe SMALLINT UNSIGNED NOT NULL PRIMARY KEY
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose Down
DROP TABLE {prefix}unique_locks;
ALTER TABLE {prefix}jobs DROP INDEX {prefix}jobs_unique_key, DROP COLUMN unique_key;
