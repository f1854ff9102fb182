-- +goose Up
-- Unique jobs (bq.Unique). A unique job's key is the SHA-256 (hex) of its
-- kind and whichever of queue, args and period bucket its spec names.
--
-- MySQL keeps the keys in a table of their own rather than in a column of
-- jobs: it has no partial index, and a REPEATABLE READ locking read (a
-- caller's transaction) locks the index gap around the key it looks up,
-- which in jobs would hold the NULL entries every other new job takes.
-- Here only unique jobs of neighbouring keys share gaps. Rows go with
-- their jobs (ON DELETE CASCADE).
--
-- unique_locks serialises the enqueuers of a key: each upserts the row of
-- its key's stripe (the first two bytes of the hash) with INSERT ... ON
-- DUPLICATE KEY UPDATE, which X-locks the row until its transaction ends,
-- then reads the key's jobs with a locking read. Stripes bound the table
-- to 65,536 rows, so no row ever needs pruning; two keys sharing a stripe
-- only take turns.
CREATE TABLE {prefix}unique_keys (
    unique_key VARBINARY(64) NOT NULL,
    job_id     BIGINT        NOT NULL,
    PRIMARY KEY (unique_key, job_id),
    INDEX {prefix}unique_keys_job (job_id),
    CONSTRAINT {prefix}unique_keys_job_fk FOREIGN KEY (job_id) REFERENCES {prefix}jobs (id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
CREATE TABLE {prefix}unique_locks (
    stripe SMALLINT UNSIGNED NOT NULL PRIMARY KEY
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose Down
DROP TABLE {prefix}unique_locks;
DROP TABLE {prefix}unique_keys;
