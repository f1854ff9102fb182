package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/bqueue/bq"
	"github.com/bqueue/bq/migrations"
)

// inspectFlags are the database flags of status, explain and ui.
type inspectFlags struct {
	dsn, prefix string
}

// newInspectFlagSet returns the flag set of an inspection command, with
// --dsn and --prefix registered.
func newInspectFlagSet(name, usage string) (*flag.FlagSet, *inspectFlags) {
	fs := flag.NewFlagSet("bq "+name, flag.ContinueOnError)
	f := &inspectFlags{}
	fs.StringVar(&f.dsn, "dsn", os.Getenv("BQ_DSN"),
		"database `DSN`: sqlite:///path/to/file.db or postgres://user:pass@host:5432/db (default $BQ_DSN)")
	fs.StringVar(&f.prefix, "prefix", migrations.DefaultPrefix, "table-name `prefix` of bq's tables")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: bq %s\n\nFlags:\n", usage)
		fs.PrintDefaults()
	}
	return fs, f
}

// open opens a client for reading (and, for the dashboard's actions,
// retrying or discarding failed jobs). It runs no workers and registers
// no gauges.
func (f *inspectFlags) open(ctx context.Context) (*bq.Client, error) {
	if f.dsn == "" {
		return nil, errors.New("--dsn is required (or set BQ_DSN)")
	}
	if err := migrations.ValidatePrefix(f.prefix); err != nil {
		return nil, fmt.Errorf("--prefix: %w", err)
	}
	return bq.Open(ctx, f.dsn, bq.Config{Prefix: f.prefix, NoGauges: true,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
}

// ago writes how long before now t was: "3s ago", "never".
func ago(t, now time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return age(now.Sub(t)) + " ago"
}

// age rounds a duration for a table cell.
func age(d time.Duration) string {
	switch {
	case d <= 0:
		return "0s"
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Hour:
		return d.Round(time.Second).String()
	default:
		return d.Round(time.Minute).String()
	}
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// writeJSON prints v as indented JSON.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
