// Package migrations holds bq's schema as goose migrations, one set per
// dialect, and applies them with the table prefix the caller chose.
package migrations

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"hash/fnv"
	"io/fs"
	"regexp"
	"strconv"
	"strings"
	"testing/fstest"
	"time"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

//go:embed postgres/*.sql sqlite/*.sql mysql/*.sql
var files embed.FS

// DefaultPrefix is the table-name prefix used when none is configured.
const DefaultPrefix = "bq_"

var prefixPattern = regexp.MustCompile(`^[a-z][a-z0-9_]{0,30}$`)

// ValidatePrefix checks that prefix is safe to splice into SQL as part of
// an identifier: lower-case letters, digits and underscores, starting with
// a letter, at most 31 characters.
func ValidatePrefix(prefix string) error {
	if !prefixPattern.MatchString(prefix) {
		return fmt.Errorf("invalid table prefix %q: use lower-case letters, digits and underscores, starting with a letter (at most 31 characters), e.g. %q", prefix, DefaultPrefix)
	}
	return nil
}

// NewProvider returns a goose provider for dialect ("postgres", "sqlite"
// or "mysql") whose migrations create tables named with prefix. Its
// version table is prefix + "schema_migrations".
func NewProvider(db *sql.DB, dialect, prefix string) (*goose.Provider, error) {
	if err := ValidatePrefix(prefix); err != nil {
		return nil, err
	}
	var gooseDialect goose.Dialect
	switch dialect {
	case "postgres":
		gooseDialect = goose.DialectPostgres
	case "sqlite":
		gooseDialect = goose.DialectSQLite3
	case "mysql":
		gooseDialect = goose.DialectMySQL
	default:
		return nil, fmt.Errorf("no migrations for dialect %q", dialect)
	}
	fsys, err := withPrefix(dialect, prefix)
	if err != nil {
		return nil, err
	}
	opts := []goose.ProviderOption{
		goose.WithTableName(prefix + "schema_migrations"),
		goose.WithDisableGlobalRegistry(true),
	}
	if dialect == "postgres" {
		// Several processes may migrate at once on start-up; an advisory
		// lock makes the others wait instead of failing half-way.
		// The lock is database-wide; key it by schema and prefix so that
		// separate bq installations in one database do not wait on each other.
		var schema string
		if err := db.QueryRow("SELECT current_schema()").Scan(&schema); err != nil {
			return nil, fmt.Errorf("read current schema: %w", err)
		}
		h := fnv.New64a()
		h.Write([]byte(schema + "." + prefix))
		locker, err := lock.NewPostgresSessionLocker(
			lock.WithLockID(int64(h.Sum64()>>1)),
			lock.WithLockTimeout(1, 300))
		if err != nil {
			return nil, fmt.Errorf("create migration lock: %w", err)
		}
		opts = append(opts, goose.WithSessionLocker(locker))
	}
	if dialect == "mysql" {
		return newMySQLProvider(db, fsys, prefix, opts)
	}
	return goose.NewProvider(gooseDialect, db, fsys, opts...)
}

// newMySQLProvider serialises migrations like the PostgreSQL advisory
// lock, through a named lock of the server keyed by database and prefix.
func newMySQLProvider(db *sql.DB, fsys fs.FS, prefix string, opts []goose.ProviderOption) (*goose.Provider, error) {
	var database string
	if err := db.QueryRow("SELECT DATABASE()").Scan(&database); err != nil {
		return nil, fmt.Errorf("read current database: %w", err)
	}
	h := fnv.New64a()
	h.Write([]byte(database + "." + prefix))
	locker := &mysqlLocker{name: fmt.Sprintf("bq-migrate-%016x", h.Sum64()), timeout: 300}
	p, err := goose.NewProvider(goose.DialectMySQL, db, fsys, append(opts, goose.WithSessionLocker(locker))...)
	if err != nil {
		return nil, err
	}
	// goose creates its version table before it takes the session lock
	// (Up first asks HasPending, which does not lock), as CREATE TABLE
	// then INSERT of version 0 in one transaction. MySQL commits DDL at
	// once, so another process could find the table without its version
	// 0 row and fail with "missing zero version migration". Have it
	// created here, under the lock, by HasPending (which, not locking,
	// does not wait for the lock held here).
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(locker.timeout+30)*time.Second)
	defer cancel()
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("create migration version table: %w", err)
	}
	defer conn.Close()
	if err := locker.SessionLock(ctx, conn); err != nil {
		return nil, err
	}
	_, verr := p.HasPending(ctx)
	if err := locker.SessionUnlock(ctx, conn); err != nil {
		return nil, err
	}
	if verr != nil {
		return nil, fmt.Errorf("create migration version table: %w", verr)
	}
	return p, nil
}

// mysqlLocker serialises migrations with GET_LOCK, a lock of the server
// held by the session (MySQL 5.7+, MariaDB): it ends with the connection,
// so a migrator that dies releases it.
type mysqlLocker struct {
	name    string
	timeout int // seconds to wait for the lock
}

func (l *mysqlLocker) SessionLock(ctx context.Context, conn *sql.Conn) error {
	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, ?)", l.name, l.timeout).Scan(&got); err != nil {
		return fmt.Errorf("take migration lock %s: %w", l.name, err)
	}
	if !got.Valid || got.Int64 != 1 {
		return fmt.Errorf("take migration lock %s: another process has held it for %ds; is a migration stuck?", l.name, l.timeout)
	}
	return nil
}

func (l *mysqlLocker) SessionUnlock(ctx context.Context, conn *sql.Conn) error {
	if _, err := conn.ExecContext(ctx, "DO RELEASE_LOCK(?)", l.name); err != nil {
		return fmt.Errorf("release migration lock %s: %w", l.name, err)
	}
	return nil
}

// withPrefix reads dialect's migrations with {prefix} replaced.
func withPrefix(dialect, prefix string) (fs.FS, error) {
	entries, err := fs.ReadDir(files, dialect)
	if err != nil {
		return nil, fmt.Errorf("read %s migrations: %w", dialect, err)
	}
	out := fstest.MapFS{}
	for _, e := range entries {
		b, err := fs.ReadFile(files, dialect+"/"+e.Name())
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", e.Name(), err)
		}
		out[e.Name()] = &fstest.MapFile{Data: []byte(strings.ReplaceAll(string(b), "{prefix}", prefix))}
	}
	return out, nil
}

// Latest is the newest migration version of dialect: a database below it
// must be migrated before bq can use it.
func Latest(dialect string) int64 {
	entries, _ := fs.ReadDir(files, dialect)
	var latest int64
	for _, e := range entries {
		v, _, _ := strings.Cut(e.Name(), "_")
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && n > latest {
			latest = n
		}
	}
	return latest
}
