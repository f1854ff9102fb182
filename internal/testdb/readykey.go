package testdb

import (
	"context"
	"database/sql"
	"strings"
	"testing"
)

// CheckReadyKeys makes db, a database migrated with table prefix prefix,
// refuse a ready row whose key is not the one it must carry, so every
// test on it checks every path that makes jobs ready. On PostgreSQL
// (migrations 00027 and 00028) every ready and claimed row carries its
// job's concurrency key, empty for none, and its job's slots; on SQLite (migration 00025) a row of a queue whose
// policy has fair share carries it, any other row NULL; on MySQL
// (migration 00025) a row carries NULL or its job's key hash (the empty
// key's for none). A ready row of a job that does not exist is left
// alone. A test-only trigger: bq never installs it.
func CheckReadyKeys(t testing.TB, kind string, db *sql.DB, prefix string) {
	t.Helper()
	var ddls []string
	switch kind {
	case Postgres:
		ddls = []string{`
CREATE FUNCTION {p}check_ready_key() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE k TEXT; n INT;
BEGIN
	SELECT coalesce(concurrency_key, ''), slots INTO k, n FROM {p}jobs WHERE id = NEW.job_id;
	IF FOUND AND NEW.concurrency_key <> k THEN
		RAISE EXCEPTION '% row of job % carries key %, its job''s key is %', TG_TABLE_NAME, NEW.job_id, NEW.concurrency_key, k;
	END IF;
	IF FOUND AND NEW.slots <> n THEN
		RAISE EXCEPTION '% row of job % carries % slots, its job takes %', TG_TABLE_NAME, NEW.job_id, NEW.slots, n;
	END IF;
	RETURN NEW;
END $$`,
			`CREATE TRIGGER {p}check_ready_key BEFORE INSERT OR UPDATE ON {p}ready_executions
FOR EACH ROW EXECUTE FUNCTION {p}check_ready_key()`,
			`CREATE TRIGGER {p}check_claimed_key BEFORE INSERT OR UPDATE ON {p}claimed_executions
FOR EACH ROW EXECUTE FUNCTION {p}check_ready_key()`,
		}
	case SQLite:
		for _, on := range []string{"INSERT", "UPDATE"} {
			ddls = append(ddls, `CREATE TRIGGER {p}check_ready_key_`+strings.ToLower(on)+` BEFORE `+on+` ON {p}ready_executions
WHEN EXISTS (SELECT 1 FROM {p}jobs j WHERE j.id = NEW.job_id)
	AND NEW.concurrency_key IS NOT (CASE WHEN EXISTS (SELECT 1 FROM {p}policies c WHERE c.queue = NEW.queue AND c.fair_share)
		THEN coalesce((SELECT j.concurrency_key FROM {p}jobs j WHERE j.id = NEW.job_id), '') END)
BEGIN
	SELECT RAISE(ABORT, 'ready row whose key is not the one its queue and job give it');
END`)
		}
	case MySQL:
		for _, on := range []string{"INSERT", "UPDATE"} {
			ddls = append(ddls, `CREATE TRIGGER {p}check_ready_key_`+strings.ToLower(on)+` BEFORE `+on+` ON {p}ready_executions
FOR EACH ROW BEGIN
	IF NEW.concurrency_key_hash IS NOT NULL AND EXISTS (SELECT 1 FROM {p}jobs j WHERE j.id = NEW.job_id)
		AND NOT NEW.concurrency_key_hash <=> (SELECT coalesce(j.concurrency_key_hash, UNHEX(SHA2('', 256))) FROM {p}jobs j WHERE j.id = NEW.job_id) THEN
		SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'ready row whose key hash is not its job''s';
	END IF;
END`)
		}
	}
	for _, ddl := range ddls {
		if _, err := db.ExecContext(context.Background(), strings.ReplaceAll(ddl, "{p}", prefix)); err != nil {
			t.Fatalf("install the ready rows' key check: %v", err)
		}
	}
}
