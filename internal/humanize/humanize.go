// Package humanize formats durations, instants, DSNs and untrusted text
// for people: the CLI's tables, the dashboard's pages and error messages.
package humanize

import (
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf16"
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

// Time writes an instant the one way bq's messages and tables write
// instants: RFC 3339 in UTC, to the second ("2026-12-01T05:44:58Z").
func Time(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// RedactDSN hides the secrets of a data source name, whatever its shape,
// for a message or a log:
//
//	postgres://app:***@db:5432/app       a URL's password, all of it up to the
//	                                     last @ (a raw @, : or / in it too)
//	postgres://db/app?sslpassword=***    query parameters naming a secret
//	root:***@tcp(127.0.0.1:3306)/db      go-sql-driver's own form
//	host=db password=*** dbname=app      libpq's key=value form
//
// SQLite DSNs and file paths come back as they are: they hold no secret.
// It is the one redaction of DSNs: every message, log line and page that
// shows a DSN goes through it.
func RedactDSN(dsn string) string {
	var b strings.Builder
	last := 0
	for _, sp := range secretSpans(dsn) {
		b.WriteString(dsn[last:sp[0]])
		b.WriteString(redacted)
		last = sp[1]
	}
	b.WriteString(dsn[last:])
	return b.String()
}

// redacted stands for a hidden secret.
const redacted = "***"

// DSNSecrets returns the secrets dsn carries, as RedactDSN finds them,
// each as written and percent-decoded, for Redact to hide wherever they
// turn up in free text (an error a driver wrote, say).
func DSNSecrets(dsn string) []string {
	var out []string
	for _, sp := range secretSpans(dsn) {
		raw := dsn[sp[0]:sp[1]]
		out = append(out, raw)
		dec, err := url.PathUnescape(raw)
		if err == nil && dec != raw {
			out = append(out, dec)
		}
		if err == nil && strings.Contains(dec, "://") {
			out = append(out, DSNSecrets(dec)...) // a DSN's own: listen_dsn
		}
	}
	return out
}

// MinSecret is the shortest secret Redact hides in free text: a shorter
// one would match ordinary words. RedactDSN hides any length, since it
// knows where a DSN's secrets are.
const MinSecret = 4

// Redact replaces every occurrence in s of each secret (a token, or what
// DSNSecrets returned) with ***; secrets shorter than MinSecret are left.
func Redact(s string, secrets ...string) string {
	// Longest first, so that a secret holding another is hidden whole.
	secrets = slices.Clone(secrets)
	slices.SortFunc(secrets, func(a, b string) int { return len(b) - len(a) })
	for _, secret := range secrets {
		if len(secret) >= MinSecret {
			s = strings.ReplaceAll(s, secret, redacted)
		}
	}
	return s
}

// secretSpans returns the [start, end) byte ranges of dsn's secrets, in
// order.
func secretSpans(dsn string) [][2]int {
	if strings.HasPrefix(dsn, "sqlite:") || strings.HasPrefix(dsn, "file:") || strings.HasPrefix(dsn, "/") || strings.HasPrefix(dsn, ".") {
		return nil
	}
	if keyValueDSN.MatchString(dsn) {
		var spans [][2]int
		for _, m := range keyValue.FindAllStringSubmatchIndex(dsn, -1) {
			if secretName(dsn[m[2]:m[3]]) {
				spans = append(spans, [2]int{m[6], m[7]})
			}
		}
		return spans
	}
	start := 0
	if i := strings.Index(dsn, "://"); i >= 0 {
		start = i + 3
	}
	// A parameter holding a DSN of its own (listen_dsn=postgres://u:p@h)
	// ends the search for the userinfo's @: its own comes after.
	head := dsn
	if loc := nestedDSN.FindStringIndex(dsn); loc != nil && loc[0] >= start {
		head = dsn[:loc[0]]
	}
	rest := head[start:]
	// The userinfo ends at the last @: a password may hold more (and : or
	// /), which drivers read differently; hiding up to the last one hides
	// the password whichever way they read it. A "user" holding / or ?
	// means that @ was in the path or query, not after a userinfo.
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		if user, _, ok := strings.Cut(rest[:at], ":"); ok && !strings.ContainsAny(user, "/?#") {
			pass := [2]int{start + len(user) + 1, start + at}
			return append([][2]int{pass}, querySpans(dsn, start+at+1)...)
		}
	}
	return querySpans(dsn, start)
}

// nestedDSN matches a query parameter whose value is a DSN of its own,
// named ...dsn (bq's listen_dsn).
var nestedDSN = regexp.MustCompile(`[?&][A-Za-z_]*(?i:dsn)=`)

// keyValueDSN matches libpq's "key=value ..." form.
var keyValueDSN = regexp.MustCompile(`^\s*[A-Za-z_][A-Za-z0-9_]*\s*=`)

// keyValue is one pair of the key=value form: a value is a run without
// spaces, or quoted with \' and \\ escapes.
var keyValue = regexp.MustCompile(`([A-Za-z_][A-Za-z0-9_]*)(\s*=\s*)('(?:[^'\\]|\\.)*'?|\S*)`)

// querySpans returns the values of the query parameters naming a secret
// in dsn[from:], what follows a DSN's host.
func querySpans(dsn string, from int) [][2]int {
	q := strings.IndexByte(dsn[from:], '?')
	if q < 0 {
		return nil
	}
	at := from + q + 1
	query, _, _ := strings.Cut(dsn[at:], "#")
	var spans [][2]int
	for p := range strings.SplitSeq(query, "&") {
		if name, value, ok := strings.Cut(p, "="); ok && (secretName(name) || nestedSecret(name, value)) {
			spans = append(spans, [2]int{at + len(name) + 1, at + len(name) + 1 + len(value)})
		}
		at += len(p) + 1
	}
	return spans
}

// nestedSecret reports a parameter holding a DSN of its own (named ...dsn)
// that carries a secret: its whole value is hidden, since its secrets are
// percent-encoded in it.
func nestedSecret(name, value string) bool {
	if !strings.HasSuffix(strings.ToLower(name), "dsn") {
		return false
	}
	if dec, err := url.QueryUnescape(value); err == nil {
		value = dec
	}
	return len(secretSpans(value)) > 0
}

// secretName reports a parameter that carries a secret: password, pass,
// passwd, pwd, sslpassword, a token...
func secretName(name string) bool {
	n := strings.ToLower(name)
	return strings.Contains(n, "pass") || strings.Contains(n, "pwd") || strings.Contains(n, "secret") || strings.Contains(n, "token")
}

// Clip cuts s to at most n bytes, at a character boundary, and says
// whether it cut.
func Clip(s string, n int) (string, bool) {
	if len(s) <= n {
		return s, false
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n], true
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
// a terminal, reorder the text around it, or hide in it: C0 controls (tab
// and newline too), DEL, C1 controls, format characters (bidirectional
// overrides, isolates and marks, zero-width spaces and joiners, the soft
// hyphen, tag characters), line and paragraph separators, spaces other
// than U+0020 and fillers (default-ignorable characters such as U+3164),
// and bytes that are not UTF-8. Queue, kind, key, group and process names
// come from applications and their tenants: a key such as
// "acme\x1b]0;PWNED\x07" would otherwise retitle the terminal, one holding
// U+202E would print the rest of its line reversed, and one holding U+200B
// would look like another key. A character is written \u001b (\U000e0041
// beyond U+FFFF), a stray byte \x9b. So that an escape cannot be forged by
// text that spells one, a backslash before u, U, x, another backslash or
// a character written out is written twice: the key `\u202e` (six
// characters) prints as `\\u202e`. Read back, \\ is one backslash and a
// backslash before anything else is itself, so no two strings print alike.
func Terminal(s string) string { return escape(s, modeTerminal) }

// Visible is Terminal for text with a layout of its own (a page, a
// multi-line error): it keeps tabs, newlines and carriage returns.
func Visible(s string) string { return escape(s, modeVisible) }

// VisibleJSON is Visible for a JSON document: it writes the same
// characters out as JSON escapes (\u202e; a surrogate pair beyond
// U+FFFF), which JSON's own grammar already keeps apart from text that
// spells them, so an encoded document stays valid and means the same.
func VisibleJSON(s string) string { return escape(s, modeJSON) }

type escapeMode int

const (
	modeTerminal escapeMode = iota
	modeVisible
	modeJSON
)

func escape(s string, mode escapeMode) string {
	i := 0
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && size == 1) || hidden(r, mode != modeTerminal) || forgeable(s, i, mode) {
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
		case r == utf8.RuneError && size == 1 && mode == modeJSON:
			b.WriteString(`\ufffd`)
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case hidden(r, mode != modeTerminal) && mode == modeJSON && r > 0xffff:
			r1, r2 := utf16.EncodeRune(r)
			fmt.Fprintf(&b, `\u%04x\u%04x`, r1, r2)
		case hidden(r, mode != modeTerminal) && r > 0xffff:
			fmt.Fprintf(&b, `\U%08x`, r)
		case hidden(r, mode != modeTerminal):
			fmt.Fprintf(&b, `\u%04x`, r)
		case forgeable(s, i, mode):
			b.WriteString(`\\`)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// forgeable reports a backslash at s[i] that, left alone, would read as
// the start of one of escape's own escapes (or of a doubled backslash).
func forgeable(s string, i int, mode escapeMode) bool {
	if mode == modeJSON || s[i] != '\\' || i+1 >= len(s) {
		return false
	}
	switch s[i+1] {
	case 'u', 'U', 'x', '\\':
		return true
	}
	// Before a character escape will write out, a lone backslash
	// would join its escape.
	r, size := utf8.DecodeRuneInString(s[i+1:])
	return (r == utf8.RuneError && size == 1) || hidden(r, mode != modeTerminal)
}

// hidden reports a character that acts rather than shows, or shows as
// nothing or as a plain space.
func hidden(r rune, layout bool) bool {
	switch {
	case r == '\t' || r == '\n' || r == '\r':
		return !layout
	case r < 0x20, r == 0x7f, r >= 0x80 && r <= 0x9f:
		return true
	case r < 0x80:
		return false
	case r == utf8.RuneError:
		return false // U+FFFD shows as itself
	}
	return unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp, unicode.Zs, unicode.Other_Default_Ignorable_Code_Point)
}
