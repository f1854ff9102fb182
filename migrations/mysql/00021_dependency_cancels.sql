-- +goose Up
-- The jobs a dependency's failure cancelled (DependsOn): retrying the
-- failed job by hand (RetryFailed) re-arms them, waiting for it again,
-- and theirs in turn. A row is written only as such a cancel happens.
CREATE TABLE {prefix}dependency_cancels (
    depends_on BIGINT NOT NULL,
    job_id     BIGINT NOT NULL,
    PRIMARY KEY (depends_on, job_id),
    CONSTRAINT {prefix}dependency_cancels_job_fk FOREIGN KEY (job_id) REFERENCES {prefix}jobs (id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose Down
DROP TABLE {prefix}dependency_cancels;
