// Package migrations holds bq's schema as goose migrations, one set per
// dialect, and applies them with the table prefix the caller chose.
package migrations

import (
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"regexp"
	"strconv"
	"strings"
	"testing/fstest"

	"github.com/pressly/goose/v3"
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

var gooseDialects = map[string]goose.Dialect{
	"postgres": goose.DialectPostgres,
	"sqlite":   goose.DialectSQLite3,
	"mysql":    goose.DialectMySQL,
}

// NewProvider returns a goose provider for dialect ("postgres", "sqlite"
// or "mysql") whose migrations create tables named with prefix. Its
// version table is prefix + "schema_migrations". It takes no lock: run it
// under the driver's MigrationLock when other processes may migrate the
// same tables at once (goose would create its version table before any
// session lock of its own, and MySQL commits DDL at once).
func NewProvider(db *sql.DB, dialect, prefix string) (*goose.Provider, error) {
	if err := ValidatePrefix(prefix); err != nil {
		return nil, err
	}
	gooseDialect, ok := gooseDialects[dialect]
	if !ok {
		return nil, fmt.Errorf("no migrations for dialect %q", dialect)
	}
	fsys, err := withPrefix(dialect, prefix)
	if err != nil {
		return nil, err
	}
	return goose.NewProvider(gooseDialect, db, fsys,
		goose.WithTableName(prefix+"schema_migrations"),
		goose.WithDisableGlobalRegistry(true))
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
