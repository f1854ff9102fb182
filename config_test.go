package bq

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/bqueue/bq/internal/driver"

	"github.com/bqueue/bq/internal/humanize"
)

func TestConfigValidate(t *testing.T) {
	cases := []struct {
		cfg  Config
		want string
	}{
		{Config{Prefix: "Bad-Prefix"}, "Config.Prefix"},
		{Config{Queues: map[string]int{"mail": 0}}, `Config.Queues["mail"] is 0`},
		{Config{PollInterval: -time.Second}, "PollInterval is -1s"},
		{Config{HeartbeatInterval: 20 * time.Second, ProcessDeadAfter: 30 * time.Second}, "ProcessDeadAfter"},
		{Config{Retention: -5 * time.Second}, "Config.Retention"},
	}
	for _, c := range cases {
		err := c.cfg.withDefaults().validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want one mentioning %q", c.cfg, err, c.want)
		}
	}
	if err := (Config{Retention: NoRetention}).withDefaults().validate(); err != nil {
		t.Errorf("NoRetention rejected: %v", err)
	}
}

// TestOpenRedactsDSN: no error of Open shows a password, whatever the
// DSN's shape (humanize.TestRedactDSN has the shapes themselves).
func TestOpenRedactsDSN(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct{ dsn, want string }{
		{"root:hunter2@tcp(127.0.0.1:3306)/db", "go-sql-driver's form"},
		{"mysql:hunter2@tcp(127.0.0.1:3306)/db", "name one database"},
		{"host=db user=app password=hunter2", "unknown DSN"},
		{"mongodb://u:hunter2@h/x", "unknown DSN"},
		{"mysql://root:hun@ter2@127.0.0.1:1", "name one database"},
		{"mysql://root@127.0.0.1:1/db?password=hunter2&charset=sjis", "sjis"},
		{"postgres://u:hunter2@db:notaport/x", "PostgreSQL"},
		{"postgres://db:notaport/x?sslpassword=hunter2", "PostgreSQL"},
		{"postgres://u@db:notaport/x?pass=hunter2", "PostgreSQL"},
	} {
		_, err := Open(ctx, c.dsn, Config{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Open(%q): %v, want an error mentioning %q", c.dsn, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "hunter") {
			t.Errorf("Open(%q): error %q shows the password", c.dsn, err)
		}
	}
	if got := humanize.RedactDSN("postgres://h/db"); got != "postgres://h/db" {
		t.Errorf("redact changed a DSN without a password: %s", got)
	}
}

func TestDefaultBackoffGrowsWithinBounds(t *testing.T) {
	for attempt := 1; attempt <= 30; attempt++ {
		base := min(time.Second<<min(attempt-1, 12), time.Hour)
		for range 20 {
			d := DefaultBackoff(attempt)
			if d < base*3/4 || d > base*5/4 {
				t.Fatalf("attempt %d: %s outside %s ±25%%", attempt, d, base)
			}
		}
	}
}

func TestOpenMemory(t *testing.T) {
	if err := openMemory(t).checkSchema(context.Background()); err != nil {
		t.Fatalf("after Migrate: %v", err)
	}
}

// openMemory opens a migrated in-memory SQLite client, closed when the
// test ends.
func openMemory(t *testing.T) *Client { return openMemoryWith(t, Config{}) }

func TestOpenMySQLErrors(t *testing.T) {
	ctx := context.Background()
	_, err := Open(ctx, "mysql://nobody:secret@127.0.0.1:1/none?timeout=2s", Config{})
	if err == nil || !strings.Contains(err.Error(), "MySQL at 127.0.0.1:1") {
		t.Errorf("unreachable MySQL: %v, want an error naming the address", err)
	}
	if err != nil && strings.Contains(err.Error(), "secret") {
		t.Errorf("error %q leaks the password", err)
	}
	_, err = Open(ctx, "mysql://nobody:secret@127.0.0.1:1", Config{})
	if err == nil || !strings.Contains(err.Error(), "name one database") || strings.Contains(err.Error(), "secret") {
		t.Errorf("MySQL DSN without a database: %v", err)
	}
	_, err = Open(ctx, "mongodb://localhost/x", Config{})
	if err == nil || !strings.Contains(err.Error(), "mysql://") {
		t.Errorf("unknown DSN: %v, want the error to list mysql://", err)
	}
}

// The root's HistoryKeep is the one the dispatchers prune by.
func TestHistoryKeepIsTheEngines(t *testing.T) {
	if HistoryKeep != driver.HistoryKeep {
		t.Fatalf("bq.HistoryKeep %s, the engine keeps %s", HistoryKeep, driver.HistoryKeep)
	}
}
