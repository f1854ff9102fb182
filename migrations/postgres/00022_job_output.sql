-- +goose Up
-- A job's output (bq.SetOutput): JSON its run stored, at most
-- bq.MaxOutputBytes, written by the run whose claim still matches; read
-- by the jobs that wait for it (bq.DependencyOutput, Client.JobOutput).
-- Text, as the application wrote it, not re-encoded.
ALTER TABLE {prefix}jobs ADD COLUMN output TEXT;

-- +goose Down
ALTER TABLE {prefix}jobs DROP COLUMN output;
