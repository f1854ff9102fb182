-- +goose Up
-- Every admission and every release rewrites its keys' semaphore rows.
-- Packed full (fillfactor 100), a page has no room for a row's new
-- version, so the update leaves the page and writes an entry into both of
-- the table's indexes; with half of each page kept free, the new version
-- stays on its page and skips the indexes (a HOT update): the expiry
-- moves only once per half Duration (driver.RenewAfter), so the expiry
-- index rarely needs a new entry. Pages filled before this migration keep
-- their rows until those rows are deleted idle and created again.
ALTER TABLE {prefix}semaphores SET (fillfactor = 50);

-- +goose Down
ALTER TABLE {prefix}semaphores RESET (fillfactor);
