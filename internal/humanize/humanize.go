// Package humanize formats durations, instants, DSNs and untrusted text
// for people: the CLI's tables, the dashboard's pages and error messages.
package humanize

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
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

// Terminal writes out, as escapes, every character of s that could drive
// a terminal or reorder the text around it: C0 controls (tab and newline
// too), DEL, C1 controls, bidirectional overrides, isolates and marks,
// and bytes that are not UTF-8. Queue, kind, key, group and process names
// come from applications and their tenants: a key such as
// "acme\x1b]0;PWNED\x07" would otherwise retitle the terminal, and one
// holding U+202E would print the rest of its line reversed. A character is
// written \u001b, a stray byte \x9b.
func Terminal(s string) string { return escape(s, false) }

// Visible is Terminal for text with a layout of its own (a page, a JSON
// document, a multi-line error): it keeps tabs, newlines and carriage
// returns. Its escapes are valid inside JSON strings, and JSON's own
// never need them, so an encoded document stays valid and means the same.
func Visible(s string) string { return escape(s, true) }

func escape(s string, layout bool) string {
	i := 0
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && size == 1) || hidden(r, layout) {
			break
		}
		i += size
	}
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	b.WriteString(s[:i])
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case hidden(r, layout):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// hidden reports a character that acts rather than shows.
func hidden(r rune, layout bool) bool {
	switch {
	case r == '\t' || r == '\n' || r == '\r':
		return !layout
	case r < 0x20, r == 0x7f, r >= 0x80 && r <= 0x9f:
		return true
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069, r == 0x200e, r == 0x200f, r == 0x061c:
		return true
	}
	return false
}
