-- +goose Up
-- sequence: 0 for a job that is not a sequence's; 1 for a job of a
-- sequence (Concurrency.Sequence: its key's jobs run one at a time in
-- enqueue order, a failing job keeping its place through its retries);
-- 2 for such a job while it is scheduled holding its key's slot (a retry
-- or a snooze): it counts as a holder of its key, and its admission when
-- due takes no slot again.
ALTER TABLE {prefix}jobs ADD COLUMN sequence SMALLINT NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE {prefix}jobs DROP COLUMN sequence;
