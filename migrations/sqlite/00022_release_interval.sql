-- +goose Up
-- An expected start for blocked jobs (EnqueueResult.ExpectedStart,
-- Explain, Concurrency.MaxWait): each key's release interval, the mean
-- time between two releases of its slots while its line was not empty,
-- in microseconds (0 until measured), and the time of the last release
-- that found the line non-empty, in microseconds since the epoch as
-- expires_at (NULL once one found it empty), kept by the statements that
-- release slots (driver.Released).
ALTER TABLE {prefix}semaphores ADD COLUMN release_interval_us INTEGER NOT NULL DEFAULT 0;
ALTER TABLE {prefix}semaphores ADD COLUMN last_release_at INTEGER;

-- +goose Down
ALTER TABLE {prefix}semaphores DROP COLUMN last_release_at;
ALTER TABLE {prefix}semaphores DROP COLUMN release_interval_us;
