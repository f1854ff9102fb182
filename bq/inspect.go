package main

import (
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/bqueue/bq/internal/humanize"

	"github.com/bqueue/bq"
)

// inspectConfig is the client config of status, explain and ui: no
// workers, no gauges, warnings only.
func inspectConfig() bq.Config {
	return bq.Config{NoGauges: true,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
}

func ago(t, now time.Time) string { return humanize.Ago(t, now) }

func age(d time.Duration) string { return humanize.Age(d) }

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
