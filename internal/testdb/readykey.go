package testdb

import (
	"context"
	"database/sql"
	"strings"
	"testing"
)

// CheckReadyKeys makes db, a PostgreSQL database migrated with table
// prefix prefix, refuse a ready row whose key is not its job's (migration
// 00027: a ready row carries its job's concurrency key, empty for none), so
// every test on it checks every path that makes jobs ready. A ready row
// of a job that does not exist is left alone. A test-only trigger: bq
// never installs it. Other databases: nothing.
func CheckReadyKeys(t testing.TB, kind string, db *sql.DB, prefix string) {
	t.Helper()
	if kind != Postgres {
		return
	}
	for _, ddl := range []string{`
CREATE FUNCTION {p}check_ready_key() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE k TEXT;
BEGIN
	SELECT coalesce(concurrency_key, '') INTO k FROM {p}jobs WHERE id = NEW.job_id;
	IF FOUND AND NEW.concurrency_key <> k THEN
		RAISE EXCEPTION 'ready row of job % carries key %, its job''s key is %', NEW.job_id, NEW.concurrency_key, k;
	END IF;
	RETURN NEW;
END $$`,
		`CREATE TRIGGER {p}check_ready_key BEFORE INSERT OR UPDATE ON {p}ready_executions
FOR EACH ROW EXECUTE FUNCTION {p}check_ready_key()`,
	} {
		if _, err := db.ExecContext(context.Background(), strings.ReplaceAll(ddl, "{p}", prefix)); err != nil {
			t.Fatalf("install the ready rows' key check: %v", err)
		}
	}
}
