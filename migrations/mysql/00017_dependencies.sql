-- +goose Up
-- Dependencies (DependsOn): a job enqueued to wait for other jobs is
-- stored waiting, holding no slot, rate start or place in a line, with
-- its count of unmet dependencies (pending) and their number (total).
-- Each dependency is an edge from the job it waits on (depends_on) to
-- it; the edges of a job are taken as it finishes, in its finishing
-- transaction: each completed one counts down its dependent, which is
-- admitted like a new job when it reaches 0; a failed or cancelled one
-- cancels its dependents unless they run anyway (even_if_failed).
-- jobs.has_dependents marks a job with edges, so a finish looks for
-- edges only then: jobs without dependents pay nothing.
ALTER TABLE {prefix}jobs ADD COLUMN has_dependents BOOLEAN NOT NULL DEFAULT FALSE;
CREATE TABLE {prefix}waiting_executions (
    job_id     BIGINT         NOT NULL PRIMARY KEY,
    queue      VARBINARY(128) NOT NULL,
    priority   INT            NOT NULL,
    pending    INT            NOT NULL,
    total      INT            NOT NULL,
    created_at BIGINT         NOT NULL,
    CONSTRAINT {prefix}waiting_job_fk FOREIGN KEY (job_id) REFERENCES {prefix}jobs (id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
CREATE TABLE {prefix}dependencies (
    depends_on     BIGINT  NOT NULL,
    job_id         BIGINT  NOT NULL,
    even_if_failed BOOLEAN NOT NULL DEFAULT FALSE,
    PRIMARY KEY (depends_on, job_id),
    INDEX {prefix}dependencies_job (job_id),
    CONSTRAINT {prefix}dependencies_job_fk FOREIGN KEY (job_id) REFERENCES {prefix}jobs (id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose Down
DROP TABLE {prefix}dependencies;
DROP TABLE {prefix}waiting_executions;
ALTER TABLE {prefix}jobs DROP COLUMN has_dependents;
