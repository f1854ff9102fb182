package main

import (
	"cmp"
	"strings"
	"time"

	"github.com/bqueue/bq"
	"github.com/bqueue/bq/internal/humanize"
)

// benchModes are the workloads of `bq bench`.
var benchModes = []string{"drain", "steady", "keyed", "hotkey", "backlog", "rate"}

// benchOptions are the flags of `bq bench`.
type benchOptions struct {
	dsn          string
	mode         string
	jobs         int
	slots        int
	keys         int
	secondKeys   int // keyed: a second key per job, out of this many (0: none)
	to           int
	rate         float64
	batch        int
	producers    int
	backlogSmall int
	backlogLarge int
	handoffs     int
	config       string // "tuned" or "default"
	separate     bool   // steady: enqueue through a second client
	jsonOut      bool
	progress     bool
	cpuprofile   string
	sqlStats     bool
	waitEvents   bool          // PostgreSQL drains: sample pg_stat_activity while the run works
	tableStats   bool          // PostgreSQL drains: measure the tables (dead rows, size)
	autovacuum   string        // with tableStats: "on" (the server's) or "off" on the run's tables
	processes    int           // drain, steady: worker processes (0: the one client in this process)
	pool         int           // with processes: each one's connection pool (0: the driver's default)
	rateLimit    int           // rate: starts per ratePeriod per rate key
	ratePeriod   time.Duration // rate: the window rateLimit counts starts in
	rateKeys     int           // rate: rate keys, jobs round-robin over them
	window       time.Duration // steady: also report the latency per window of enqueue time (0: not)
	plans        string        // PostgreSQL: write every statement's plan to this file (auto_explain)
	fair         bool          // the bench queue's policy has FairShare
	maxActive    int           // the bench queue's policy's MaxActive (0: none)
	netDelay     time.Duration // PostgreSQL, MySQL: delay each packet by this much each way through a proxy (0: none)
}

func (o *benchOptions) validate(f *flagSet) error {
	if o.dsn == "" {
		return f.fail("--dsn is required (postgres://..., mysql://... or sqlite)")
	}
	if !strings.HasPrefix(o.dsn, "sqlite") && !strings.HasPrefix(o.dsn, "postgres") && !strings.HasPrefix(o.dsn, "mysql") {
		return f.fail("--dsn %q: use postgres://user@host:5432/db, mysql://user@host:3306/db or sqlite", humanize.RedactDSN(o.dsn))
	}
	known := false
	for _, m := range benchModes {
		known = known || m == o.mode
	}
	if !known {
		return f.fail("--mode %q: use one of %s", o.mode, strings.Join(benchModes, ", "))
	}
	if o.keys < 0 || o.to < 0 {
		return f.fail("--keys and --to must be positive")
	}
	if o.secondKeys < 0 || (o.secondKeys > 0 && o.mode != "keyed") {
		return f.fail("--second-keys %d: use a positive count with --mode keyed", o.secondKeys)
	}
	switch o.mode {
	case "keyed":
		o.keys = cmp.Or(o.keys, 1000)
		o.to = cmp.Or(o.to, 2)
	case "hotkey":
		o.keys, o.to = 1, cmp.Or(o.to, 50)
	case "backlog":
		o.keys, o.to = 1, 1
	default:
		o.keys, o.to = 0, 0
	}
	switch {
	case o.jobs < 1:
		return f.fail("--jobs must be at least 1, got %d", o.jobs)
	case o.slots < 1:
		return f.fail("--slots must be at least 1, got %d", o.slots)
	case o.rate <= 0:
		return f.fail("--rate must be positive, got %g", o.rate)
	case o.batch < 1:
		return f.fail("--batch must be at least 1, got %d", o.batch)
	case o.producers < 1:
		return f.fail("--producers must be at least 1, got %d", o.producers)
	case o.backlogSmall < 1 || o.backlogLarge < 1 || o.handoffs < 1:
		return f.fail("--backlog-small, --backlog-large and --handoffs must be at least 1")
	case o.config != "tuned" && o.config != "default":
		return f.fail("--config %q: use tuned or default", o.config)
	case o.autovacuum != "on" && o.autovacuum != "off":
		return f.fail("--autovacuum %q: use on or off", o.autovacuum)
	case o.autovacuum == "off" && !o.tableStats:
		return f.fail("--autovacuum off is a setting of --table-stats; add it")
	case o.tableStats && !strings.HasPrefix(o.dsn, "postgres"):
		return f.fail("--table-stats reads PostgreSQL's statistics: use a postgres:// DSN")
	case o.tableStats && o.mode != "drain" && o.mode != "keyed" && o.mode != "hotkey":
		return f.fail("--table-stats measures a drain: use --mode drain, keyed or hotkey")
	case o.waitEvents && strings.HasPrefix(o.dsn, "sqlite"):
		return f.fail("--wait-events samples a database server's connections, and SQLite has none: use a postgres:// or mysql:// DSN")
	case o.waitEvents && o.mode != "drain" && o.mode != "keyed" && o.mode != "hotkey":
		return f.fail("--wait-events samples a drain: use --mode drain, keyed or hotkey")
	case f.given("processes") && (o.processes < 1 || o.processes > maxProcesses):
		return f.fail("--processes must be from 1 to %d, got %d (leave it out to work the jobs in this process)", maxProcesses, o.processes)
	case o.pool < 0 || o.pool > 0 && o.processes == 0:
		return f.fail("--pool sizes the pools of --processes workers: give --processes, and a --pool of at least 1")
	case o.processes > 0 && !fleetModes[o.mode]:
		return f.fail("--processes runs --mode drain, steady, keyed or hotkey, not %s", o.mode)
	case o.mode == "rate" && (o.rateLimit < 1 || o.rateLimit > bq.MaxRateLimit):
		return f.fail("--rate-limit must be from 1 to %d starts per period (bq.MaxRateLimit), got %d", bq.MaxRateLimit, o.rateLimit)
	case o.mode == "rate" && (o.ratePeriod < time.Millisecond || o.ratePeriod%time.Millisecond != 0):
		return f.fail("--rate-period %s: use whole milliseconds, 1ms or more (e.g. 1s, 250ms)", o.ratePeriod)
	case o.window < 0 || o.window > 0 && (o.mode != "steady" || o.window < 100*time.Millisecond):
		return f.fail("--window %s: use 100ms or more with --mode steady (e.g. --window 10s)", o.window)
	case o.mode == "rate" && o.rateKeys < 1:
		return f.fail("--rate-keys must be at least 1, got %d", o.rateKeys)
	case o.mode == "rate" && o.jobs <= o.rateKeys*o.rateLimit:
		return f.fail("--jobs %d: the rate mode needs more jobs than --rate-keys x --rate-limit (%d), which start at once; use --jobs %d or more",
			o.jobs, o.rateKeys*o.rateLimit, 10*o.rateKeys*o.rateLimit)
	case o.plans != "" && !strings.HasPrefix(o.dsn, "postgres"):
		return f.fail("--plans logs PostgreSQL's plans (auto_explain): use a postgres:// DSN")
	case o.maxActive < 0:
		return f.fail("--max-active %d: use a cap of 1 or more running jobs, or 0 (the default) for none", o.maxActive)
	case o.netDelay < 0:
		return f.fail("--net-delay %s: use a positive duration (e.g. 250us), or leave it out for none", o.netDelay)
	case o.netDelay > 0 && strings.HasPrefix(o.dsn, "sqlite"):
		return f.fail("--net-delay delays the packets to a database server, and SQLite has none: use a postgres:// or mysql:// DSN, or leave out --net-delay")
	case o.processes > 0 && (o.tableStats || o.cpuprofile != "" || o.sqlStats || o.separate || o.plans != ""):
		return f.fail("--processes measures the fleet: leave out --table-stats, --cpuprofile, --sql-stats, --plans and --separate-producer, which measure one process")
	}
	return nil
}
