package main

import (
	"slices"
	"strings"
	"testing"
)

// TestCeilingFractions: each throughput is divided by its ceiling of the
// same round, the median of those ratios shown with each round's; an item
// without its ceiling gets no row.
func TestCeilingFractions(t *testing.T) {
	work := func(vs ...float64) []*result {
		var out []*result
		for _, v := range vs {
			out = append(out, &result{WorkPerS: v, EnqueuePerS: 10 * v})
		}
		return out
	}
	r := report{results: map[string][]*result{
		// Round 2 is twice as fast for both: the fraction stays 0.5, 0.6, 0.4.
		"pg/bq/drain":               work(3000, 12000, 2000),
		"pg/ceiling/claim-complete": work(6000, 20000, 5000),
		"pg/ceiling/enqueue":        {{EnqueuePerS: 60000}, {EnqueuePerS: 240000}, {EnqueuePerS: 40000}},
		"mysql/bq/drain":            work(1000),
	}}
	got := r.ceilingTable()
	for _, want := range []string{
		"| PostgreSQL | bq drain work/s (pg/bq/drain) | `pg/ceiling/claim-complete` | 0.50 [0.50, 0.60, 0.40] | 3000 [3000, 12000, 2000] | 6000 [6000, 20000, 5000] |",
		"| PostgreSQL | bq EnqueueMany/s (pg/bq/drain) | `pg/ceiling/enqueue` | 0.50 [0.50, 0.50, 0.50] |",
		"No ceiling is measured for SQLite.",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("ceiling table lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "| MySQL |") || strings.Contains(got, "River drain") {
		t.Errorf("rows without their ceiling or throughput were shown:\n%s", got)
	}
	if (report{results: map[string][]*result{"pg/bq/drain": work(1)}}).ceilingTable() != "" {
		t.Error("a run without ceilings got a ceiling section")
	}

	// The targets read the same ratios.
	get := func(id string) []*result { return r.results[id] }
	for _, tc := range []struct {
		what string
		want []float64
	}{
		{"PostgreSQL drain: bq work/s ÷ the claim-complete ceiling", []float64{0.5, 0.6, 0.4}},
		{"PostgreSQL EnqueueMany/s ÷ the enqueue ceiling", []float64{0.5, 0.5, 0.5}},
	} {
		i := slices.IndexFunc(targets(0), func(tg target) bool { return tg.what == tc.what })
		if i < 0 {
			t.Fatalf("no target %q", tc.what)
		}
		tg := targets(0)[i]
		vals, _ := tg.measure(get)
		if !slices.Equal(vals, tc.want) {
			t.Errorf("%s: %v, want %v", tc.what, vals, tc.want)
		}
		if m := median(vals); tg.ok(m) {
			t.Errorf("%s: median %.2f met the goal %s", tc.what, m, tg.goal)
		}
	}
}

// TestFleetTarget: 16 processes are compared with one of the same round.
func TestFleetTarget(t *testing.T) {
	res := func(p int, work float64) *result {
		return &result{WorkPerS: work, Slots: 25, Fleet: &fleet{Processes: p, ConnsPeak: 5*p + 1, WakeupsPerJob: 0.01}}
	}
	r := report{
		items: []item{{id: "pg/bq/fleet-1"}, {id: "pg/bq/fleet-16"}},
		results: map[string][]*result{
			"pg/bq/fleet-1":  {res(1, 1000), res(1, 2000)},
			"pg/bq/fleet-16": {res(16, 900), res(16, 1400)},
		},
	}
	i := slices.IndexFunc(targets(0), func(tg target) bool { return strings.HasPrefix(tg.what, "PostgreSQL fleet: 16 processes ÷ 1") })
	vals, _ := targets(0)[i].measure(func(id string) []*result { return r.results[id] })
	if !slices.Equal(vals, []float64{0.9, 0.7}) || !targets(0)[i].ok(median(vals)) {
		t.Errorf("fleet ratios %v (median %.2f), want [0.9 0.7] and met", vals, median(vals))
	}
	got := r.fleetTable()
	if want := "| pg/bq/fleet-16 | 16 × 25 | 1150 [900, 1400] | 81 [81, 81] |"; !strings.Contains(got, want) {
		t.Errorf("fleet table lacks %q:\n%s", want, got)
	}
}

// TestMatrixItems: the ceilings, fleet and rate items exist where they
// should, --only selects them by word, and only dead-rows selections
// splice into an old report.
func TestMatrixItems(t *testing.T) {
	s := sizes{drain: 100, keyed: 100, hotkey: 100, steady: 100, rate: 500, slots: 100, backlogSmall: 10, backlogLarge: 100,
		backlogRuns: 1, fleetJobs: 1000, fleetSlots: 25, fleetPGPool: 3, fleetMySQLPool: 4, rateJobs: 5000, rateLimit: 500}
	var items []item
	for _, d := range []string{"postgres", "sqlite", "mysql"} {
		items = append(items, matrix(d, "postgres://x/test", "mysql://y/test", s, 3)...)
	}
	ids := func(its []item) []string {
		var out []string
		for _, it := range its {
			out = append(out, it.id)
		}
		return out
	}
	sel := ids(selectItems(items, "ceiling,fleet"))
	var want []string
	for _, db := range []string{"pg", "mysql"} {
		want = append(want, db+"/ceiling/enqueue", db+"/ceiling/claim-complete")
		if db == "mysql" {
			want = append(want, "mysql/ceiling/claim-complete-27")
		}
		for _, p := range []string{"1", "4", "16"} {
			want = append(want, db+"/bq/fleet-"+p, db+"/bq/fleet-keyed-"+p, db+"/bq/fleet-hotkey-"+p)
		}
	}
	if !slices.Equal(sel, want) {
		t.Errorf("--only ceiling,fleet selected %v, want %v", sel, want)
	}
	if sel := ids(selectItems(items, "rate")); !slices.Equal(sel, []string{"pg/bq/rate", "sqlite/bq/rate", "mysql/bq/rate"}) {
		t.Errorf("--only rate selected %v", sel)
	}
	if !slices.Contains(ids(items), "mysql/bq/backlog") {
		t.Error("no MySQL backlog item")
	}
	// Graphile Worker: PostgreSQL only, right after River's drain, with
	// bq's slots and jobs.
	if sel := ids(selectItems(items, "graphile")); !slices.Equal(sel, []string{"pg/graphile/drain"}) {
		t.Errorf("--only graphile selected %v, want pg/graphile/drain alone", sel)
	}
	if i := slices.IndexFunc(items, func(it item) bool { return it.id == "pg/graphile/drain" }); i < 1 || items[i-1].id != "pg/river/drain" ||
		items[i].bin != "graphile" || !strings.Contains(strings.Join(items[i].args, " "), "--slots 100 --jobs 100") {
		t.Errorf("the Graphile item is not beside River's drain with bq's slots and jobs: %+v", items[max(i, 0)])
	}
	for _, it := range items {
		args := strings.Join(it.args, " ")
		switch {
		case it.id == "pg/bq/fleet-16" && !strings.HasSuffix(args, "--slots 25 --mode drain --jobs 1000 --processes 16 --pool 3"):
			t.Errorf("%s: args %q", it.id, args)
		case it.id == "mysql/bq/fleet-16" && !strings.HasSuffix(args, "--processes 16 --pool 4"):
			t.Errorf("%s: args %q", it.id, args)
		case it.id == "pg/bq/fleet-keyed-4" && !strings.HasSuffix(args, "--slots 25 --mode keyed --jobs 1000 --processes 4 --keys 1000 --to 2 --pool 3"):
			t.Errorf("%s: args %q", it.id, args)
		case it.id == "mysql/bq/fleet-hotkey-16" && !strings.HasSuffix(args, "--slots 25 --mode hotkey --jobs 1000 --processes 16 --to 50 --pool 4"):
			t.Errorf("%s: args %q", it.id, args)
		case it.id == "mysql/ceiling/claim-complete-27" && (it.bin != "ceiling" || args != "--dsn mysql://y/test --mode claim-complete --batch 27"):
			t.Errorf("%s: %s %q", it.id, it.bin, args)
		case it.id == "pg/bq/rate" && !strings.Contains(args, "--mode rate --jobs 5000 --rate-limit 500 --rate-period 1s"):
			t.Errorf("%s: args %q", it.id, args)
		case it.runs != 3 && !it.tables && !strings.HasSuffix(it.id, "/backlog"):
			t.Errorf("%s runs in %d rounds of 3", it.id, it.runs)
		}
	}
	if allTables(selectItems(items, "ceiling")) || !allTables(selectItems(items, "dead")) {
		t.Error("only the dead-rows runs rewrite part of the old report")
	}
	r := report{pgDSN: "postgres://x/test"}
	if got := r.command(items[0]); got != "go run ./bench/ceiling --dsn $PG --mode enqueue" {
		t.Errorf("ceiling command %q", got)
	}
}

// TestKeyedTable: every keyed run is divided by the unkeyed drain of its
// round, a fleet run by the fleet drain of as many processes; a run
// without its unkeyed drain, and the dead-rows runs, get no row.
func TestKeyedTable(t *testing.T) {
	res := func(vals ...float64) []*result {
		var out []*result
		for _, v := range vals {
			out = append(out, &result{WorkPerS: v, EnqueuePerS: 10 * v})
		}
		return out
	}
	for id, want := range map[string]string{
		"pg/bq/keyed": "pg/bq/drain", "sqlite/bq/keyed-second": "sqlite/bq/drain", "mysql/bq/hotkey": "mysql/bq/drain",
		"pg/bq/fleet-keyed-16": "pg/bq/fleet-16", "mysql/bq/fleet-hotkey-4": "mysql/bq/fleet-4",
		"pg/bq/drain": "", "pg/bq/fleet-16": "", "pg/bq/keyed-dead": "", "pg/river/drain": "", "pg/ceiling/enqueue": "",
	} {
		if got := keyedBase(id); got != want {
			t.Errorf("keyedBase(%q) = %q, want %q", id, got, want)
		}
	}
	r := report{
		items: []item{{id: "pg/bq/drain"}, {id: "pg/bq/keyed"}, {id: "pg/bq/hotkey"}, {id: "pg/bq/fleet-4"},
			{id: "pg/bq/fleet-keyed-4"}, {id: "mysql/bq/keyed"}, {id: "pg/bq/keyed-dead", tables: true}},
		results: map[string][]*result{
			// Round 2 is twice as fast for both: the ratios stay.
			"pg/bq/drain":         res(1000, 2000, 1000),
			"pg/bq/keyed":         res(500, 1000, 400),
			"pg/bq/hotkey":        res(300, 600, 300),
			"pg/bq/fleet-4":       res(800, 1000),
			"pg/bq/fleet-keyed-4": res(400, 700),
			"mysql/bq/keyed":      res(100),
			"pg/bq/keyed-dead":    res(1),
		},
	}
	got := r.keyedTable()
	for _, want := range []string{
		"| pg/bq/keyed | `pg/bq/drain` | 0.50 [0.50, 0.50, 0.40]× | 0.50 [0.50, 0.50, 0.40]× | 500 [500, 1000, 400] | 1000 [1000, 2000, 1000] |",
		"| pg/bq/hotkey | `pg/bq/drain` | 0.30 [0.30, 0.30, 0.30]× |",
		"| pg/bq/fleet-keyed-4 | `pg/bq/fleet-4` | 0.60 [0.50, 0.70]× |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("keyed table lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "mysql/bq/keyed") || strings.Contains(got, "keyed-dead") {
		t.Errorf("a run without its unkeyed drain, or a dead-rows run, got a row:\n%s", got)
	}
}
