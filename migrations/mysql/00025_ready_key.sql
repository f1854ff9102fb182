-- +goose Up
-- A fair-share queue's ready rows carry their job's concurrency key hash
-- (the hash of '' for a keyless job, the key fair share gives them), so
-- its claim reads each key's first ready jobs from ready_key's entries,
-- without joining every ready row of the queue to its job (the whole
-- read: O(ready rows)). The rows are made with NULL; a fair claim about
-- to read per key fills the hashes its queue's rows lack, in its own
-- transaction (sqlexec.SharedQueries.FillReadyKeys), so no statement
-- that makes a ready row reads the job or the policy, and a queue
-- without fair share writes nothing more than the NULL entry.
ALTER TABLE {prefix}ready_executions ADD COLUMN concurrency_key_hash BINARY(32) NULL,
    ADD INDEX {prefix}ready_key (queue, concurrency_key_hash, priority DESC, job_id);

-- +goose Down
ALTER TABLE {prefix}ready_executions DROP INDEX {prefix}ready_key, DROP COLUMN concurrency_key_hash;
