-- +goose Up
-- sequence, bits: 1 a job of a sequence (Concurrency.Sequence: its key's
-- jobs run one at a time in enqueue order, a failing job keeping its
-- place through its retries); 4 its sequence halts when it fails for good
-- (SequenceHaltOnFailure); 2 while it holds its key's slot scheduled (a
-- retry or a snooze) or failed (a halting sequence): it counts as a holder
-- of its key, and is made ready without taking a slot again. 0: not a
-- sequence's job.
ALTER TABLE {prefix}jobs ADD COLUMN sequence SMALLINT NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE {prefix}jobs DROP COLUMN sequence;
