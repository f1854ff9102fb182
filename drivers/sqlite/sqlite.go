// Package sqlite runs bq on SQLite through modernc.org/sqlite (pure Go, no
// cgo). SQLite has no row locks, so every write transaction starts with
// BEGIN IMMEDIATE and takes the database's single write lock; WAL lets
// readers go on meanwhile, and busy_timeout lets several processes share
// one file.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net/url"
	"os"
	"strings"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/sqlexec"
	"github.com/bqueue/bq/migrations"
)

// engine is bq's SQLite driver as the engine sees it; users hold it
// sealed in a Driver.
type engine struct {
	db     *sql.DB
	owned  bool
	prefix string
	dl     *dialect
	// writer serialises this process's write transactions in Go, so they
	// queue on a channel instead of spinning in SQLite's busy handler;
	// busy_timeout still arbitrates between processes.
	writer chan struct{}
	memory bool   // an in-memory database: one connection, one process
	path   string // the file Open opened; "" for New
	stmts  *stmtCache
	ckpt   *checkpointer // nil for in-memory databases
	// beacons is the directory of the processes' beacons (beacon.go); ""
	// for an in-memory database.
	beacons string
}

// Pragmas are applied to every connection Open makes. The WAL's automatic
// checkpoint threshold is 10,000 pages, not 1,000: the driver's
// background checkpointer keeps the WAL short, and the automatic one,
// which stalls every writer of the process, is only a safety net.
// temp_store(memory) keeps statement journals in memory: a statement
// that changes pages an earlier statement of its transaction changed
// (a keyed batch's semaphores and lines) saves their old content first,
// to a temporary file by default, one write call a page.
const pragmas = "_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=foreign_keys(1)&_pragma=synchronous(NORMAL)&_pragma=wal_autocheckpoint(10000)&_pragma=temp_store(memory)&_txlock=immediate"

// DSN returns the modernc.org/sqlite data source name bq uses for path:
// WAL (checkpointed in the background by the driver), foreign keys, a
// 10 s busy timeout and BEGIN IMMEDIATE transactions.
// Use it when opening a *sql.DB of your own to pass to New.
func DSN(path string) string {
	if path == ":memory:" {
		return "file::memory:?" + pragmas
	}
	return "file:" + (&url.URL{Path: path}).EscapedPath() + "?" + pragmas
}

// ParseURL returns the path a sqlite: DSN names. After sqlite: comes
// the path, and after sqlite:// an absolute one, so an absolute path
// takes three slashes and a relative one none:
//
//	sqlite:///var/lib/app/jobs.db   /var/lib/app/jobs.db
//	sqlite:jobs.db                  jobs.db, in the working directory
//	sqlite::memory:                 an in-memory database
//
// A query (?...) is ignored. Four slashes (SQLAlchemy's absolute form)
// and two before a relative path (where a URL has its host) are refused
// with the spelling to use, rather than opened as something else.
func ParseURL(dsn string) (string, error) {
	rest, ok := strings.CutPrefix(dsn, "sqlite:")
	if !ok {
		return "", fmt.Errorf("parse SQLite DSN %q: it must start with sqlite: (sqlite:///path/to/file.db)", dsn)
	}
	rest, _, _ = strings.Cut(rest, "?")
	if after, ok := strings.CutPrefix(rest, "//"); ok {
		abs := "/" + strings.TrimLeft(after, "/")
		switch slashes := len(rest) - len(strings.TrimLeft(rest, "/")); {
		case after == ":memory:":
		case slashes > 3:
			return "", fmt.Errorf("parse SQLite DSN %q: %d slashes; an absolute path takes three: sqlite://%s", dsn, slashes, abs)
		case slashes == 2 && after != "":
			first, _, _ := strings.Cut(after, "/")
			return "", fmt.Errorf("parse SQLite DSN %q: after sqlite:// comes an absolute path, not a host (%q): write sqlite://%s (three slashes) for the absolute path %s, or sqlite:%s for a path relative to the working directory",
				dsn, first, abs, abs, after)
		}
		rest = after
	}
	return rest, nil
}

// Open opens (creating if needed) the database file at path, or an
// in-memory database for ":memory:".
func Open(ctx context.Context, path string) (*Driver, error) {
	return open(ctx, path, "")
}

// OpenExisting is Open for a database file that must exist: it creates
// nothing, and a missing file is an error wrapping fs.ErrNotExist. For
// tools that only read or tend a database (bq status, explain, ui).
func OpenExisting(ctx context.Context, path string) (*Driver, error) {
	if path != ":memory:" && path != "" {
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			return nil, missingFile(path)
		}
	}
	// mode=rw: a file removed since the check is not created either.
	return open(ctx, path, "&mode=rw")
}

// missingFile is OpenExisting's error for a file that is not there.
type missingFile string

func (m missingFile) Error() string { return "no such database file: " + string(m) }
func (m missingFile) Unwrap() error { return fs.ErrNotExist }

func open(ctx context.Context, path, params string) (*Driver, error) {
	if path == "" {
		return nil, errors.New("open SQLite: empty path: use sqlite:///path/to/file.db or sqlite::memory: for an in-memory database")
	}
	db, err := sql.Open("sqlite", DSN(path)+params)
	if err != nil {
		return nil, fmt.Errorf("open SQLite database %s: %w", path, err)
	}
	if path == ":memory:" {
		// Each connection to :memory: is a database of its own.
		db.SetMaxOpenConns(1)
	}
	if err := ping(ctx, db); err != nil {
		db.Close()
		return nil, fmt.Errorf("open SQLite database %s: %w", path, err)
	}
	d := newDriver(db, true, migrations.DefaultPrefix)
	d.memory, d.path = path == ":memory:", path
	d.beacons = beaconDirOf(dbPath(ctx, db))
	if !d.memory {
		d.ckpt = startCheckpointer(db)
	}
	return &Driver{driver.Seal(d)}, nil
}

// ping opens the first connection. Switching a new file to WAL takes an
// exclusive lock without waiting in the busy handler, so processes
// opening one fresh file at once can meet SQLITE_BUSY: try again, for as
// long as busy_timeout would wait.
func ping(ctx context.Context, db *sql.DB) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := db.PingContext(ctx)
		var se *sqlite.Error
		if err == nil || !errors.As(err, &se) || se.Code()&0xff != sqlite3.SQLITE_BUSY || time.Now().After(deadline) {
			return err
		}
		select {
		case <-time.After(time.Duration(5+rand.IntN(20)) * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// New wraps a *sql.DB opened with the "sqlite" driver of modernc.org/sqlite;
// open it with DSN(path) so transactions begin IMMEDIATE. The driver runs
// a background WAL checkpointer until Close; the DB stays the caller's to
// close.
func New(db *sql.DB) *Driver {
	d := newDriver(db, false, migrations.DefaultPrefix)
	d.ckpt = startCheckpointer(db)
	d.beacons = beaconDirOf(dbPath(context.Background(), db))
	return &Driver{driver.Seal(d)}
}

func newDriver(db *sql.DB, owned bool, prefix string) *engine {
	d := &engine{db: db, owned: owned, prefix: prefix, writer: make(chan struct{}, 1), stmts: newStmtCache(db)}
	d.dl = newDialect(d, prefix)
	return d
}

// DB returns the underlying *sql.DB.
func (d *engine) DB() *sql.DB { return d.db }

func (d *engine) Dialect() driver.Dialect { return driver.SQLite }
func (d *engine) Prefix() string          { return d.prefix }

// SingleWriter: a write transaction takes the database's one write lock
// (see driver.SingleWriter).
func (d *engine) SingleWriter() {}

// Claim looks for ready jobs before it takes the database's write lock,
// so an idle poll never holds up other writers.
func (d *engine) Claim(ctx context.Context, p driver.ClaimParams) ([]*driver.Claim, error) {
	return driver.ClaimWithin(ctx, d, p, driver.ClaimWays{LookFirst: true})
}

func (d *engine) WithPrefix(prefix string) driver.Driver {
	w := &engine{db: d.db, owned: d.owned, prefix: prefix, writer: d.writer,
		memory: d.memory, path: d.path, stmts: d.stmts, ckpt: d.ckpt, beacons: d.beacons}
	w.dl = newDialect(w, prefix)
	return w
}

// Exec returns an executor whose writes each run in a transaction of
// their own.
func (d *engine) Exec() driver.Executor {
	return executor{sqlexec.New(d.dl, d, prepared{db: d.db, cache: d.stmts}), d}
}

func (d *engine) Begin(ctx context.Context) (driver.Tx, error) {
	select {
	case d.writer <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("begin transaction: %w", ctx.Err())
	}
	tx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		<-d.writer
		return nil, fmt.Errorf("begin transaction: %w", err)
	}
	t := sqlexec.Begun(d.dl, d, tx, prepared{db: tx, tx: tx, cache: d.stmts}, func() { <-d.writer })
	return txExecutor{executor{t.Executor, d}, sqlexec.Ending{Tx: t}}, nil
}

func (d *engine) WrapTx(tx any) (driver.Executor, error) {
	return sqlexec.WrapUser(d.dl, d, "SQLite", tx, func(x *sqlexec.Executor) driver.Executor { return executor{x, d} })
}

// Retryable reports SQLITE_BUSY and SQLITE_LOCKED.
func (d *engine) Retryable(err error) bool {
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
			return true
		}
	}
	return err != nil && strings.Contains(err.Error(), "database is locked")
}

// Refusal reports SQLITE_READONLY (a file or directory it may not
// write, a read-only open) and SQLITE_FULL.
func (d *engine) Refusal(err error) driver.Refusal {
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_READONLY:
			return driver.ReadOnly
		case sqlite3.SQLITE_FULL:
			return driver.Full
		}
	}
	return driver.NotRefused
}

func (d *engine) SQLDB() *sql.DB { return d.db }

func (d *engine) Close() error {
	d.ckpt.close()
	d.stmts.close()
	if d.owned {
		return d.db.Close()
	}
	return nil
}
