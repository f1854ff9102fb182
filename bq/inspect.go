package main

import (
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/bqueue/bq"
)

// inspectConfig is the client config of status, explain and ui: no
// workers, no gauges, warnings only.
func inspectConfig() bq.Config {
	return bq.Config{NoGauges: true,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
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
