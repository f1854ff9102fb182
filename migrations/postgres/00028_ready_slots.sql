-- +goose Up
-- A ready row carries its job's slots (JobOptions.Slots, 1 for most), so
-- a fair-share claim reads the head of the ready line, with each job's key
-- (00027) and slots, from the ready rows alone, where it probed each row's
-- job (about two thirds of the read).
ALTER TABLE {prefix}ready_executions ADD COLUMN slots INT NOT NULL DEFAULT 1;
UPDATE {prefix}ready_executions r SET slots = j.slots
FROM {prefix}jobs j WHERE j.id = r.job_id AND j.slots <> 1;

-- +goose Down
ALTER TABLE {prefix}ready_executions DROP COLUMN slots;
