-- +goose Up
-- The slots a job takes of each of its concurrency keys (JobOptions.Slots):
-- a job of k slots holds k of every one of its keys while ready, claimed
-- or waiting in a rate line, taken all at once, given back all at once.
ALTER TABLE {prefix}jobs ADD COLUMN slots INTEGER NOT NULL DEFAULT 1;

-- +goose Down
ALTER TABLE {prefix}jobs DROP COLUMN slots;
