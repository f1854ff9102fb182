package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"text/tabwriter"
	"time"

	"github.com/bqueue/bq/internal/humanize"

	"github.com/bqueue/bq"
)

// inspectConfig is the client config of status, explain and ui: no
// workers, no gauges, warnings only, to w (the command's stderr, through
// the redactor: bq queue pause's warning of a queue no job uses, say).
func inspectConfig(w io.Writer) bq.Config {
	return bq.Config{NoGauges: true,
		Logger: slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn}))}
}

func ago(t, now time.Time) string { return humanize.Ago(t, now) }

func age(d time.Duration) string { return humanize.Age(d) }

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// term makes a name from the database safe to print: see
// humanize.Terminal. Every printer of user data goes through it.
func term(s string) string { return humanize.Terminal(s) }

// printTable writes a list action's table (bq weight list, bq key list):
// none when it has no rows (n), else the header and rows that table
// writes, aligned; what names the rows in an error.
func printTable(w io.Writer, n int, none, what string, table func(tw io.Writer)) error {
	if n == 0 {
		fmt.Fprintln(w, none)
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	table(tw)
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("print %s: %w", what, err)
	}
	return nil
}

// writeJSON prints v as indented JSON, with the characters that drive a
// terminal written as JSON escapes (the encoder leaves DEL, C1 controls
// and bidi marks raw).
func writeJSON(w io.Writer, v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return err
	}
	_, err := io.WriteString(w, humanize.VisibleJSON(buf.String()))
	return err
}
