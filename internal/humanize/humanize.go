// Package humanize formats durations, instants and DSNs for people: the
// CLI's tables, the dashboard's pages and error messages.
package humanize

import (
	"strconv"
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

// Thousands writes n with commas between groups of three digits: 10,001.
func Thousands(n int) string {
	s := strconv.Itoa(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}
