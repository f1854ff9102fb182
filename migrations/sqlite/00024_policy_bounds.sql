-- +goose Up
-- Queue-policy bounds of flow control: max_wait_us is the default
-- Concurrency.MaxWait (whole microseconds; 0: none) of the queue's keyed
-- jobs that set none; adaptive_min turns adaptive limits on for the
-- queue's keyed jobs whose kind sets no Concurrency.Adaptive, with that
-- floor (0: off).
ALTER TABLE {prefix}policies ADD COLUMN max_wait_us INTEGER NOT NULL DEFAULT 0;
ALTER TABLE {prefix}policies ADD COLUMN adaptive_min INTEGER NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE {prefix}policies DROP COLUMN adaptive_min;
ALTER TABLE {prefix}policies DROP COLUMN max_wait_us;
