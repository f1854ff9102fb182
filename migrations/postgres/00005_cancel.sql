-- +goose Up
-- Cancel (client.Cancel, bq.Cancel): cancelled is a finished job's third
-- ending, beside completed and discarded. cancel_requested_at marks a
-- running job's claim whose cancel was asked for: its process cancels the
-- run's context when it sees the mark (woken through the notification
-- channel, else at its next heartbeat), and the run's end, or the reaping
-- of its claim, finishes the job as cancelled and only then frees its slot.
ALTER TABLE {prefix}jobs ADD COLUMN cancelled BOOLEAN NOT NULL DEFAULT FALSE;
ALTER TABLE {prefix}claimed_executions ADD COLUMN cancel_requested_at TIMESTAMPTZ;

-- +goose Down
ALTER TABLE {prefix}claimed_executions DROP COLUMN cancel_requested_at;
ALTER TABLE {prefix}jobs DROP COLUMN cancelled;
