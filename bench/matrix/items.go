package main

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// item is one command of the matrix.
type item struct {
	id   string // e.g. "pg/bq/drain"
	name string
	args []string // after the binary
	bin  string   // "bq", "river", "ceiling" or "graphile"
	runs int      // rounds it runs in (the first ones)
	// tables: a --table-stats run, reported in the dead-rows section
	// rather than among the timings.
	tables bool
}

type sizes struct {
	drain, keyed, hotkey, steady int
	rate                         float64
	slots                        int
	backlogSmall, backlogLarge   int
	backlogRuns                  int
	mysqlBacklogRuns             int
	fleetJobs, fleetSlots        int
	fleetPGPool, fleetMySQLPool  int
	rateJobs, rateLimit          int
	// netDelay is the --net-delay of the network rows (drain-net,
	// keyed-net, hotkey-net on PostgreSQL and MySQL); 0 leaves them out.
	netDelay time.Duration
}

// durationArg is d as a command-line duration, "250us" rather than
// Duration.String's "250µs".
func durationArg(d time.Duration) string {
	return strings.ReplaceAll(d.String(), "µ", "u")
}

// selectItems keeps the items whose id contains one of the comma-separated
// words of only.
func selectItems(items []item, only string) []item {
	var out []item
	for _, it := range items {
		for w := range strings.SplitSeq(only, ",") {
			if w != "" && strings.Contains(it.id, w) {
				out = append(out, it)
				break
			}
		}
	}
	return out
}

// allTables says whether every item is a dead-rows (--table-stats) run.
func allTables(items []item) bool {
	for _, it := range items {
		if !it.tables {
			return false
		}
	}
	return true
}

// matrix lists driver d's commands.
func matrix(d, dsn, mysqlDSN string, s sizes, rounds int) []item {
	short, arg := "pg", dsn
	switch d {
	case "sqlite":
		short, arg = "sqlite", "sqlite"
	case "mysql":
		short, arg = "mysql", mysqlDSN
	}
	n := func(v int) string { return fmt.Sprint(v) }
	slots := n(s.slots)
	rate := fmt.Sprint(s.rate)
	bqItem := func(id string, extra ...string) item {
		args := append([]string{"bench", "--dsn", arg, "--json", "--slots", slots}, extra...)
		return item{id: short + "/bq/" + id, name: "bq bench " + strings.Join(extra, " ") + " on " + d, args: args, bin: "bq", runs: rounds}
	}
	riverItem := func(id string, extra ...string) item {
		args := append([]string{"--dsn", arg, "--json", "--slots", slots}, extra...)
		return item{id: short + "/river/" + id, name: "river-bench " + strings.Join(extra, " ") + " on " + d, args: args, bin: "river", runs: rounds}
	}
	// Graphile Worker (bench/graphile, Node), PostgreSQL only, with its
	// best settings (bench.js says which).
	graphileItem := func(id string, extra ...string) item {
		args := append([]string{"--dsn", arg, "--slots", slots}, extra...)
		return item{id: short + "/graphile/" + id, name: "bench/graphile " + strings.Join(extra, " ") + " on " + d, args: args, bin: "graphile", runs: rounds}
	}
	// The database alone (bench/ceiling), on a fresh database each run;
	// SQLite has no ceiling program.
	ceilingItem := func(id string, extra ...string) item {
		args := append([]string{"--dsn", arg, "--mode"}, extra...)
		return item{id: short + "/ceiling/" + id, name: "ceiling --mode " + strings.Join(extra, " ") + " on " + d, args: args, bin: "ceiling", runs: rounds}
	}
	var ceilings []item
	switch d {
	case "postgres":
		ceilings = []item{ceilingItem("enqueue", "enqueue"), ceilingItem("claim-complete", "claim-complete")}
	case "mysql":
		// Batch 100 is the ceiling; 27 is about what bq's claims average.
		ceilings = []item{ceilingItem("enqueue", "enqueue"), ceilingItem("claim-complete", "claim-complete", "--batch", "100"),
			ceilingItem("claim-complete-27", "claim-complete", "--batch", "27")}
	}
	// The fleet: the drain worked by N child processes of --fleet-slots
	// slots each (bq bench --processes), the parent only enqueueing; then
	// the keyed drain (1,000 keys, To=2) and the hot key (To=50) by the
	// same processes, right after the unkeyed drain they are divided by.
	var fleetItems []item
	if d != "sqlite" {
		for _, p := range []int{1, 4, 16} {
			for _, m := range []struct{ id, mode string }{{"", "drain"}, {"keyed-", "keyed"}, {"hotkey-", "hotkey"}} {
				args := []string{"--mode", m.mode, "--jobs", n(s.fleetJobs), "--processes", n(p)}
				switch m.mode {
				case "keyed":
					args = append(args, "--keys", "1000", "--to", "2")
				case "hotkey":
					args = append(args, "--to", "50")
				}
				it := bqItem(fmt.Sprintf("fleet-%s%d", m.id, p), args...)
				it.args[5] = n(s.fleetSlots) // --slots: per process
				// Bounded pools, as docs/scaling.md measured them, so that 16
				// processes fit a stock max_connections (PostgreSQL 100, MySQL
				// 151, whose pool is otherwise unbounded) beside other clients.
				pool := s.fleetPGPool
				if d == "mysql" {
					pool = s.fleetMySQLPool
				}
				it.args = append(it.args, "--pool", n(pool))
				it.name = fmt.Sprintf("bq bench --mode %s --processes %d --slots %d on %s", m.mode, p, s.fleetSlots, d)
				fleetItems = append(fleetItems, it)
			}
		}
	}
	// A rate limit's throughput: one key at --rate-limit starts per second.
	rateItem := bqItem("rate", "--mode", "rate", "--jobs", n(s.rateJobs), "--rate-limit", n(s.rateLimit), "--rate-period", "1s")
	backlog := bqItem("backlog", "--mode", "backlog", "--backlog-small", n(s.backlogSmall),
		"--backlog-large", n(s.backlogLarge), "--batch", "10000")
	backlog.runs = min(s.backlogRuns, rounds)
	if d == "mysql" {
		// Building MySQL's large line takes ~2.5 min (~7,000 blocked
		// jobs/s); the ratio is of handoffs alternating within one run.
		backlog.runs = min(s.mysqlBacklogRuns, rounds)
	}
	// Across a network: the drain, the keyed drain and the hot key with
	// every packet to the server delayed (bq bench --net-delay), one after
	// the other so that each ratio is of runs side by side. SQLite has no
	// server to be across a network from.
	var netItems []item
	if d != "sqlite" && s.netDelay > 0 {
		delay := durationArg(s.netDelay)
		netItems = []item{
			bqItem("drain-net", "--mode", "drain", "--jobs", n(s.drain), "--net-delay", delay),
			bqItem("keyed-net", "--mode", "keyed", "--jobs", n(s.keyed), "--keys", "1000", "--to", "2", "--net-delay", delay),
			bqItem("hotkey-net", "--mode", "hotkey", "--jobs", n(s.hotkey), "--to", "50", "--net-delay", delay),
		}
	}
	var pgOnly []item
	if d == "postgres" {
		// What bq's defaults leave on the table: a pool sized for the
		// slots (pgx's default is max(4, CPUs) connections), and the
		// wake-up that LISTEN/NOTIFY would give a producer in another
		// process (the enqueueing client is not the working one).
		sep := "?"
		if strings.Contains(dsn, "?") {
			sep = "&"
		}
		pool := bqItem("drain-pool16", "--mode", "drain", "--jobs", n(s.drain))
		pool.args[2] = dsn + sep + "pool_max_conns=16"
		pool.name += " (pool_max_conns=16)"
		pgOnly = append(pgOnly, pool,
			bqItem("steady-remote", "--mode", "steady", "--jobs", n(s.steady), "--rate", rate, "--separate-producer"))
		// Dead rows and table size, bq beside River, in the first round
		// only (they are counts): with autovacuum off on the run's tables,
		// so that every dead tuple made is counted, then as the server
		// has it.
		for _, av := range []string{"off", "on"} {
			suffix := ""
			if av == "on" {
				suffix = "-av"
			}
			dead := []item{
				bqItem("drain-dead"+suffix, "--mode", "drain", "--jobs", n(s.drain), "--table-stats", "--autovacuum", av),
				riverItem("drain-dead"+suffix, "--mode", "drain", "--jobs", n(s.drain), "--table-stats", "--autovacuum", av),
				bqItem("keyed-dead"+suffix, "--mode", "keyed", "--jobs", n(s.keyed), "--keys", "1000", "--to", "2",
					"--table-stats", "--autovacuum", av),
			}
			for i := range dead {
				dead[i].runs, dead[i].tables = 1, true
			}
			pgOnly = append(pgOnly, dead...)
		}
	}
	if d == "mysql" {
		// River has no MySQL driver: bq's own figures beside the ceiling.
		out := append(ceilings,
			bqItem("drain", "--mode", "drain", "--jobs", n(s.drain)),
			bqItem("keyed", "--mode", "keyed", "--jobs", n(s.keyed), "--keys", "1000", "--to", "2"),
			// The cost of a second key per job (never binding: limit 1000).
			bqItem("keyed-second", "--mode", "keyed", "--jobs", n(s.keyed), "--keys", "1000", "--to", "2", "--second-keys", "10"),
			// The cost of fair share (issue 35): the keyed drain in a queue whose
			// policy has FairShare.
			bqItem("keyed-fair", "--mode", "keyed", "--jobs", n(s.keyed), "--keys", "1000", "--to", "2", "--fair"),
			bqItem("keyed-deep", "--mode", "keyed", "--jobs", n(s.keyed), "--keys", "10", "--to", "1000"),
			bqItem("keyed-fair-deep", "--mode", "keyed", "--jobs", n(s.keyed), "--keys", "10", "--to", "1000", "--fair"),
			bqItem("hotkey", "--mode", "hotkey", "--jobs", n(s.hotkey), "--to", "50"),
		)
		out = append(out, netItems...)
		out = append(out,
			bqItem("steady", "--mode", "steady", "--jobs", n(s.steady), "--rate", rate),
			rateItem,
			backlog,
		)
		return append(out, fleetItems...)
	}
	out := append(ceilings,
		bqItem("drain", "--mode", "drain", "--jobs", n(s.drain)),
		riverItem("drain", "--mode", "drain", "--jobs", n(s.drain)),
		bqItem("drain-default", "--mode", "drain", "--jobs", n(s.drain), "--config", "default"),
		bqItem("keyed", "--mode", "keyed", "--jobs", n(s.keyed), "--keys", "1000", "--to", "2"),
		// The cost of a second key per job (never binding: limit 1000).
		bqItem("keyed-second", "--mode", "keyed", "--jobs", n(s.keyed), "--keys", "1000", "--to", "2", "--second-keys", "10"),
		// The cost of fair share (issue 35): the keyed drain in a queue whose
		// policy has FairShare.
		bqItem("keyed-fair", "--mode", "keyed", "--jobs", n(s.keyed), "--keys", "1000", "--to", "2", "--fair"),
		// And on a backlog deep in 10 keys whose limits never bind: the
		// claims whose head cannot decide read every key's first jobs.
		bqItem("keyed-deep", "--mode", "keyed", "--jobs", n(s.keyed), "--keys", "10", "--to", "1000"),
		bqItem("keyed-fair-deep", "--mode", "keyed", "--jobs", n(s.keyed), "--keys", "10", "--to", "1000", "--fair"),
		bqItem("hotkey", "--mode", "hotkey", "--jobs", n(s.hotkey), "--to", "50"),
	)
	if d == "postgres" {
		out = slices.Insert(out, slices.IndexFunc(out, func(it item) bool { return it.id == "pg/river/drain" })+1,
			graphileItem("drain", "--jobs", n(s.drain)))
	}
	out = append(out, netItems...)
	out = append(out,
		bqItem("steady", "--mode", "steady", "--jobs", n(s.steady), "--rate", rate),
		riverItem("steady", "--mode", "steady", "--jobs", n(s.steady), "--rate", rate),
		bqItem("steady-default", "--mode", "steady", "--jobs", n(s.steady), "--rate", rate, "--config", "default"),
		rateItem,
		backlog,
	)
	out = append(out, fleetItems...)
	return append(out, pgOnly...)
}
