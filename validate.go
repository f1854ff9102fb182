package bq

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/bqueue/bq/internal/humanize"
)

// MaxKeyBytes is the longest full concurrency key, Group + "/" + Key, in
// bytes: 2048, the most every database bq runs on can index (at least 512
// characters of any script). A longer key is refused before it reaches
// the database, on every database alike; hash a longer natural key.
const MaxKeyBytes = 2048

// maxQueueBytes is the longest queue name, as the queue columns hold.
const maxQueueBytes = 128

// queueRule is the queue name rule, for error messages.
const queueRule = "use 1 to 128 ASCII letters, digits, '_', '-', '.' or ':', starting with a letter or digit"

// validateQueue checks a queue name against queueRule: names appear in
// URLs, logs, metric attributes and the CLI's output, where spaces,
// control characters or quotes would be ambiguous.
func validateQueue(q string) error {
	ok := q != "" && len(q) <= maxQueueBytes && isAlnum(q[0])
	for i := 0; ok && i < len(q); i++ {
		ok = isAlnum(q[i]) || strings.IndexByte("_-.:", q[i]) >= 0
	}
	if !ok {
		return fmt.Errorf("queue name %s is invalid: %s", quoted(q), queueRule)
	}
	return nil
}

func isAlnum(b byte) bool {
	return 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9'
}

// validateKey checks a full concurrency key (Group + "/" + Key): at most
// MaxKeyBytes, valid UTF-8, no NUL byte. PostgreSQL refuses the last two in
// text; the others would store them, and a key must mean the same on all.
func validateKey(key string) error {
	const fix = "keys (Group + \"/\" + Key) are valid UTF-8 without NUL bytes, at most %d bytes (bq.MaxKeyBytes); hash a longer or binary key, e.g. hex of its SHA-256"
	switch {
	case len(key) > MaxKeyBytes:
		return fmt.Errorf("concurrency key %s is %d bytes long: "+fix, quoted(key), len(key), MaxKeyBytes)
	case !utf8.ValidString(key):
		return fmt.Errorf("concurrency key %s is not valid UTF-8: "+fix, quoted(key), MaxKeyBytes)
	case strings.IndexByte(key, 0) >= 0:
		return fmt.Errorf("concurrency key %s has a NUL byte: "+fix, quoted(key), MaxKeyBytes)
	}
	return nil
}

// groupInKey writes a Group into a full key with '%' and '/' escaped (as
// %25 and %2F), so the first '/' of a full key always ends its group: a
// job of Group "billing" for tenant "charge/acme" and one of Group
// "billing/charge" for tenant "acme" hold different keys. A Group without
// either character reads as it is.
var groupInKey = strings.NewReplacer("%", "%25", "/", "%2F")

// fullKey is the full concurrency key of group and key.
func fullKey(group, key string) string { return groupInKey.Replace(group) + "/" + key }

// validateGroup checks a Concurrency.Group: the start of every full key.
func validateGroup(group string) error {
	if len(groupInKey.Replace(group))+1 >= MaxKeyBytes {
		return fmt.Errorf("concurrency Group %s is %d bytes long: a full key (Group + \"/\" + Key) is at most %d bytes (bq.MaxKeyBytes); use a shorter Group",
			quoted(group), len(group), MaxKeyBytes)
	}
	if err := validateKey(group); err != nil {
		return fmt.Errorf("concurrency Group: %w", err)
	}
	return nil
}

// validateTo checks a limit per key named what, as Concurrency.To and
// WithConcurrencyKey take it: one rule, one wording.
func validateTo(what string, to int) error {
	if to < 0 {
		return fmt.Errorf("%s is %d: use 1 or more jobs at once per key, or 0 for the default (the queue policy's MaxActivePerKey, else 1)", what, to)
	}
	return nil
}

// quoted is s quoted with %q, cut to its first 32 bytes (whole
// characters) when longer than 64: an error must not repeat a huge key.
func quoted(s string) string {
	if len(s) <= 64 {
		return fmt.Sprintf("%q", s)
	}
	start, _ := humanize.Clip(s, 32)
	return fmt.Sprintf("%q...", start)
}

// validateFullKey checks a full key given whole (Group + "/" + Key), as
// WithMoreConcurrencyKeys takes it: its group must not be empty.
func validateFullKey(key string) error {
	if strings.IndexByte(key, '/') < 1 {
		return fmt.Errorf("concurrency key %s has no group before a '/': name it bq.Key(group, key)", quoted(key))
	}
	return validateKey(key)
}
