// Package humanize formats durations, instants and DSNs for people: the
// CLI's tables, the dashboard's pages and error messages.
package humanize

import (
	"strings"
	"time"
)

// Age rounds a duration to what a table cell needs: milliseconds under a
// second, seconds under an hour, minutes above.
func Age(d time.Duration) string {
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

// Ago says how long before now t was ("3s ago", "in 2m0s", "never").
func Ago(t, now time.Time) string {
	if t.IsZero() {
		return "never"
	}
	if d := now.Sub(t); d < 0 {
		return "in " + Age(-d)
	}
	return Age(now.Sub(t)) + " ago"
}

// RedactDSN hides the password of a URL-style DSN.
func RedactDSN(dsn string) string {
	scheme, rest, ok := strings.Cut(dsn, "://")
	if !ok {
		return dsn
	}
	userinfo, host, ok := strings.Cut(rest, "@")
	if !ok {
		return dsn
	}
	if user, _, hasPass := strings.Cut(userinfo, ":"); hasPass {
		return scheme + "://" + user + ":***@" + host
	}
	return dsn
}
