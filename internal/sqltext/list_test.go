package sqltext

import (
	"strings"
	"testing"

	"github.com/bqueue/bq/internal/driver"
)

func TestPrefixEnd(t *testing.T) {
	for _, c := range []struct {
		prefix, want string
		ok           bool
	}{
		{"g/a", "g/b", true},
		{"g/é", "g/ê", true},
		{"g/\uD7FF", "g/\uE000", true},
		{"g/\U0010FFFF", "g0", true},
		{"\U0010FFFF", "", false},
	} {
		got, ok := PrefixEnd(c.prefix)
		if got != c.want || ok != c.ok {
			t.Errorf("PrefixEnd(%q) = %q, %v; want %q, %v", c.prefix, got, ok, c.want, c.ok)
		}
		if ok && !(c.prefix+"\U0010FFFF" < got) {
			t.Errorf("PrefixEnd(%q) = %q is not above every extension of the prefix", c.prefix, got)
		}
	}
}

// TestListJobsParameterises: no filter value is spliced into the SQL.
func TestListJobsParameterises(t *testing.T) {
	const evil = "x' OR '1'='1"
	q, args := ListJobs(driver.JobFilter{Kinds: []string{evil}, Queues: []string{evil}, KeyPrefix: evil, Max: 5},
		ListSpelling{Text: func(s string) any { return s }})
	if strings.Contains(q, evil) {
		t.Errorf("the value is in the SQL: %s", q)
	}
	if n := strings.Count(q, "?"); n != len(args) {
		t.Errorf("%d placeholders, %d args", n, len(args))
	}
}
