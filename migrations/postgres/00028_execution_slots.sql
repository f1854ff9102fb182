-- +goose Up
-- A ready row carries its job's slots (JobOptions.Slots, 1 for most), so
-- a fair-share claim reads the head of the ready line, with each job's key
-- (00027) and slots, from the ready rows alone, where it probed each row's
-- job (about two thirds of the read). A claimed row takes both from the
-- ready row it replaces, so the running slots by key (a fair claim's, a
-- capped queue's) are summed from the claimed rows alone.
ALTER TABLE {prefix}ready_executions ADD COLUMN slots INT NOT NULL DEFAULT 1;
UPDATE {prefix}ready_executions r SET slots = j.slots
FROM {prefix}jobs j WHERE j.id = r.job_id AND j.slots <> 1;
ALTER TABLE {prefix}claimed_executions ADD COLUMN concurrency_key TEXT NOT NULL DEFAULT '',
	ADD COLUMN slots INT NOT NULL DEFAULT 1;
UPDATE {prefix}claimed_executions c SET concurrency_key = coalesce(j.concurrency_key, ''), slots = j.slots
FROM {prefix}jobs j WHERE j.id = c.job_id AND (j.concurrency_key IS NOT NULL OR j.slots <> 1);

-- +goose Down
ALTER TABLE {prefix}claimed_executions DROP COLUMN concurrency_key, DROP COLUMN slots;
ALTER TABLE {prefix}ready_executions DROP COLUMN slots;
