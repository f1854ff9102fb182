-- +goose Up
-- The signal log replaces the signals table's counter row per queue, which
-- an enqueue bumped inside the caller's transaction: the row stayed
-- locked until that transaction committed, so every other enqueue of the
-- queue waited for it (up to the 50 s lock wait). Appending a row takes
-- no lock another insert waits for; listeners read the rows past the last
-- they read and prune what every listener has read (drivers/mysql).
--
-- created_at (Unix microseconds) lets rows no listener will read be pruned
-- by age. The signals table stays for processes of earlier versions
-- during a rolling upgrade; nothing of this version reads it.
CREATE TABLE {prefix}signal_log (
    id         BIGINT         NOT NULL AUTO_INCREMENT PRIMARY KEY,
    queue      VARBINARY(128) NOT NULL,
    created_at BIGINT         NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose Down
DROP TABLE {prefix}signal_log;
