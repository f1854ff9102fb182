package main

import (
	"strings"
	"testing"

	"github.com/bqueue/bq/internal/pgstats"
)

// TestDeadRowsSplice: --only writes the dead-rows section after the
// targets of a report that had none, then replaces it, keeping the head.
func TestDeadRowsSplice(t *testing.T) {
	tables := func(jobs int, dead int64) *result {
		return &result{Jobs: jobs, Tables: &pgstats.Report{Autovacuum: "off", Server: pgstats.Settings{Autovacuum: "on"},
			Tables: []pgstats.Change{{Table: "t", Inserted: int64(jobs), Updated: dead, Grown: 1 << 20}}}}
	}
	r := report{
		items: []item{
			{id: "pg/bq/drain-dead", bin: "bq", args: []string{"bench"}, tables: true},
			{id: "pg/river/drain-dead", bin: "river", args: []string{"--mode", "drain"}, tables: true},
		},
		results: map[string][]*result{"pg/bq/drain-dead": {tables(1000, 3000)}, "pg/river/drain-dead": {tables(2000, 4000)}},
		partial: true,
	}
	head := "# Benchmarks\n\n## Targets\n\n| target |\n"
	old := head + rawLine + " `x`\n\n## Reading these numbers\n\nold notes\n"
	once, err := splice(old, r.tail())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{head + deadRowsTitle, "| pg/bq/drain-dead | off | 1,000 | 3,000,000 (3.00/job) |",
		"1.50× the dead tuples per job (3.00 ÷ 2.00), 2.00× the growth per job", notes} {
		if !strings.Contains(once, want) {
			t.Errorf("spliced report lacks %q:\n%s", want, once)
		}
	}
	if strings.Contains(once, "old notes") {
		t.Errorf("the old notes were kept:\n%s", once)
	}
	twice, err := splice(once, r.tail())
	if err != nil || twice != once {
		t.Errorf("a second splice changed the report (err %v):\n%s", err, twice)
	}
	if _, err := splice("# no report\n", r.tail()); err == nil {
		t.Error("a file with neither the section nor the raw line was spliced")
	}
}
