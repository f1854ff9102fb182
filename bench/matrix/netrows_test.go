package main

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// TestNetItems: PostgreSQL and MySQL run the drain, the keyed drain and the
// hot key across a network with the loopback items' job counts, SQLite
// does not, --net-delay 0 leaves them out, and --only net selects them.
func TestNetItems(t *testing.T) {
	s := sizes{drain: 2000, keyed: 3000, hotkey: 1000, steady: 100, rate: 500, slots: 100, backlogSmall: 10, backlogLarge: 100,
		backlogRuns: 1, fleetJobs: 1000, fleetSlots: 25, fleetPGPool: 3, fleetMySQLPool: 4, rateJobs: 5000, rateLimit: 500,
		netDelay: 250 * time.Microsecond}
	byID := func(its []item) map[string]item {
		m := map[string]item{}
		for _, it := range its {
			m[it.id] = it
		}
		return m
	}
	var all []item
	for _, tc := range []struct{ d, db, dsn string }{{"postgres", "pg", "postgres://x/test"}, {"mysql", "mysql", "mysql://y/test"}} {
		items := matrix(tc.d, "postgres://x/test", "mysql://y/test", s, 3)
		all = append(all, items...)
		got := byID(items)
		for id, want := range map[string]string{
			"drain-net":  "--mode drain --jobs 2000 --net-delay 250us",
			"keyed-net":  "--mode keyed --jobs 3000 --keys 1000 --to 2 --net-delay 250us",
			"hotkey-net": "--mode hotkey --jobs 1000 --to 50 --net-delay 250us",
		} {
			it, ok := got[tc.db+"/bq/"+id]
			if !ok {
				t.Errorf("%s: no %s item", tc.d, id)
				continue
			}
			if args := strings.Join(it.args, " "); args != "bench --dsn "+tc.dsn+" --json --slots 100 "+want || it.bin != "bq" || it.runs != 3 || it.tables {
				t.Errorf("%s: %s %q, runs %d, tables %v", it.id, it.bin, args, it.runs, it.tables)
			}
			// The loopback item of the same workload, but for the delay.
			lo := got[tc.db+"/bq/"+strings.TrimSuffix(id, "-net")]
			if want := strings.Join(lo.args, " ") + " --net-delay 250us"; strings.Join(it.args, " ") != want {
				t.Errorf("%s: args %q, want the loopback item's %q", it.id, it.args, want)
			}
		}
		// Side by side: the three in a row, the drain first.
		i := slices.IndexFunc(items, func(it item) bool { return it.id == tc.db+"/bq/drain-net" })
		if i < 0 || i+2 >= len(items) || items[i+1].id != tc.db+"/bq/keyed-net" || items[i+2].id != tc.db+"/bq/hotkey-net" {
			t.Errorf("%s: the network items are not drain, keyed, hotkey in a row", tc.d)
		}
		off := s
		off.netDelay = 0
		for _, it := range matrix(tc.d, "postgres://x/test", "mysql://y/test", off, 3) {
			if strings.HasSuffix(it.id, "-net") || slices.Contains(it.args, "--net-delay") {
				t.Errorf("%s with --net-delay 0: %s %q", tc.d, it.id, it.args)
			}
		}
		if n := len(matrix(tc.d, "postgres://x/test", "mysql://y/test", off, 3)); n != len(items)-3 {
			t.Errorf("%s: %d items with --net-delay 0, %d with 250us", tc.d, n, len(items))
		}
	}
	for _, it := range matrix("sqlite", "postgres://x/test", "mysql://y/test", s, 3) {
		if strings.Contains(it.id, "net") || slices.Contains(it.args, "--net-delay") {
			t.Errorf("sqlite: %s %q", it.id, it.args)
		}
	}
	var sel []string
	for _, it := range selectItems(append(all, matrix("sqlite", "postgres://x/test", "mysql://y/test", s, 3)...), "net") {
		sel = append(sel, it.id)
	}
	want := []string{"pg/bq/drain-net", "pg/bq/keyed-net", "pg/bq/hotkey-net", "mysql/bq/drain-net", "mysql/bq/keyed-net", "mysql/bq/hotkey-net"}
	if !slices.Equal(sel, want) {
		t.Errorf("--only net selected %v, want %v", sel, want)
	}
	if durationArg(1500*time.Microsecond) != "1.5ms" || durationArg(250*time.Microsecond) != "250us" {
		t.Errorf("durationArg: %s, %s", durationArg(1500*time.Microsecond), durationArg(250*time.Microsecond))
	}
}

// TestNetRatios: the network rows' keyed and hot-key ratios are of the
// drain across the network of the same round, in the targets beside the
// loopback keyed rows and in the keyed table; with --net-delay 0 the
// targets have no network rows.
func TestNetRatios(t *testing.T) {
	res := func(vals ...float64) []*result {
		var out []*result
		for _, v := range vals {
			out = append(out, &result{WorkPerS: v, EnqueuePerS: 10 * v})
		}
		return out
	}
	r := report{
		items: []item{{id: "pg/bq/drain"}, {id: "pg/bq/keyed"}, {id: "pg/bq/drain-net"}, {id: "pg/bq/keyed-net"}, {id: "pg/bq/hotkey-net"},
			{id: "mysql/bq/drain-net"}, {id: "mysql/bq/keyed-net"}, {id: "mysql/bq/hotkey-net"}},
		results: map[string][]*result{
			// The loopback drain is not what the network rows divide by, and a
			// ratio is of one round (pg keyed-net: median 0.80 of the rounds,
			// not 900 ÷ 1000 of the medians).
			"pg/bq/drain":         res(100000, 100000, 100000),
			"pg/bq/keyed":         res(500, 500, 500),
			"pg/bq/drain-net":     res(1000, 2000, 1000),
			"pg/bq/keyed-net":     res(800, 1400, 900),
			"pg/bq/hotkey-net":    res(300, 800, 400),
			"mysql/bq/drain-net":  res(500, 1000, 400),
			"mysql/bq/keyed-net":  res(400, 900, 200),
			"mysql/bq/hotkey-net": res(100, 300, 100),
		},
		s: sizes{netDelay: 250 * time.Microsecond},
	}
	get := func(id string) []*result { return r.results[id] }
	ts := targets(r.s.netDelay)
	whats := make([]string, len(ts))
	for i, tg := range ts {
		whats[i] = tg.what
	}
	for _, tc := range []struct {
		what, goal, after string
		want              []float64
		met               bool
	}{
		{"PostgreSQL keyed (1,000 keys, To=2) ÷ unkeyed drain across a network (--net-delay 250us)", "≥ 0.8",
			"PostgreSQL hotkey (1 key, To=50) ÷ bq unkeyed drain", []float64{0.8, 0.7, 0.9}, true},
		{"PostgreSQL hotkey (1 key, To=50) ÷ unkeyed drain across a network (--net-delay 250us)", "≥ 0.7",
			"PostgreSQL keyed (1,000 keys, To=2) ÷ unkeyed drain across a network (--net-delay 250us)", []float64{0.3, 0.4, 0.4}, false},
		{"MySQL keyed (1,000 keys, To=2) ÷ unkeyed drain across a network (--net-delay 250us)", "≥ 0.8",
			"MySQL keyed (1,000 keys, To=2) ÷ bq unkeyed drain", []float64{0.8, 0.9, 0.5}, true},
		{"MySQL hotkey (1 key, To=50) ÷ unkeyed drain across a network (--net-delay 250us)", "≥ 0.7",
			"MySQL keyed (1,000 keys, To=2) ÷ unkeyed drain across a network (--net-delay 250us)", []float64{0.2, 0.3, 0.25}, false},
	} {
		i := slices.Index(whats, tc.what)
		if i < 1 {
			t.Errorf("no target %q", tc.what)
			continue
		}
		if whats[i-1] != tc.after {
			t.Errorf("%q follows %q, want %q", tc.what, whats[i-1], tc.after)
		}
		tg := ts[i]
		vals, unit := tg.measure(get)
		if !slices.Equal(vals, tc.want) || unit != "×" || tg.goal != tc.goal || tg.ok(median(vals)) != tc.met {
			t.Errorf("%s: %v%s (goal %s, met %v), want %v (goal %s, met %v)", tc.what, vals, unit, tg.goal, tg.ok(median(vals)), tc.want, tc.goal, tc.met)
		}
	}
	for _, tg := range targets(0) {
		if strings.Contains(tg.what, "network") {
			t.Errorf("--net-delay 0 kept the target %q", tg.what)
		}
	}
	if len(targets(0)) != len(ts)-4 {
		t.Errorf("%d targets with --net-delay 0, %d with 250us", len(targets(0)), len(ts))
	}

	head := r.head()
	for _, want := range []string{
		"| PostgreSQL keyed (1,000 keys, To=2) ÷ unkeyed drain across a network (--net-delay 250us) | ≥ 0.8 | 0.80 [0.80, 0.70, 0.90]× | met |",
		"| PostgreSQL hotkey (1 key, To=50) ÷ unkeyed drain across a network (--net-delay 250us) | ≥ 0.7 | 0.40 [0.30, 0.40, 0.40]× | **missed** |",
		"| MySQL hotkey (1 key, To=50) ÷ unkeyed drain across a network (--net-delay 250us) | ≥ 0.7 | 0.25 [0.20, 0.30, 0.25]× | **missed** |",
		"| pg/bq/keyed-net | `pg/bq/drain-net` | 0.80 [0.80, 0.70, 0.90]× | 0.80 [0.80, 0.70, 0.90]× | 900 [800, 1400, 900] | 1000 [1000, 2000, 1000] |",
		"| mysql/bq/hotkey-net | `mysql/bq/drain-net` | 0.25 [0.20, 0.30, 0.25]× |",
	} {
		if !strings.Contains(head, want) {
			t.Errorf("report lacks %q:\n%s", want, head)
		}
	}
	if keyedBase("pg/bq/drain-net") != "" {
		t.Error("the network drain is divided by something")
	}
}
