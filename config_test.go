package bq

import (
	"context"
	"strings"
	"testing"
	"time"

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

func TestRedact(t *testing.T) {
	if got := humanize.RedactDSN("postgres://u:secret@h/db"); strings.Contains(got, "secret") {
		t.Errorf("redact kept the password: %s", got)
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
	ctx := context.Background()
	c, err := Open(ctx, "sqlite::memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.checkSchema(ctx); err != nil {
		t.Fatalf("after Migrate: %v", err)
	}
}

func TestOpenMySQLErrors(t *testing.T) {
	ctx := context.Background()
	_, err := Open(ctx, "mysql://nobody:secret@127.0.0.1:1/none?timeout=2s")
	if err == nil || !strings.Contains(err.Error(), "MySQL at 127.0.0.1:1") {
		t.Errorf("unreachable MySQL: %v, want an error naming the address", err)
	}
	if err != nil && strings.Contains(err.Error(), "secret") {
		t.Errorf("error %q leaks the password", err)
	}
	_, err = Open(ctx, "mysql://nobody:secret@127.0.0.1:1")
	if err == nil || !strings.Contains(err.Error(), "name one database") || strings.Contains(err.Error(), "secret") {
		t.Errorf("MySQL DSN without a database: %v", err)
	}
	_, err = Open(ctx, "mongodb://localhost/x")
	if err == nil || !strings.Contains(err.Error(), "mysql://") {
		t.Errorf("unknown DSN: %v, want the error to list mysql://", err)
	}
}
