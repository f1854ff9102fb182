package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/bqueue/bq"
	bqmysql "github.com/bqueue/bq/drivers/mysql"
	"github.com/bqueue/bq/drivers/postgres"
	"github.com/bqueue/bq/internal/humanize"
	"github.com/bqueue/bq/internal/pgstats"
)

// bencher is one run of `bq bench`.
type bencher struct {
	e        *env
	o        benchOptions
	log      *slog.Logger
	profile  *os.File
	profiled bool // the profile was started; one per run
	stats    *sqlStats
	plans    *planLog // --plans
	net      *netDelay
}

// startNetDelay starts --net-delay's proxy in front of --dsn's server;
// every client of the run connects through it.
func (b *bencher) startNetDelay() error {
	_, target, err := netDelayDSN(b.o.dsn, "127.0.0.1:0")
	if err != nil {
		return err
	}
	var once sync.Once
	b.net, err = startNetDelay(target, b.o.netDelay, func(err error) {
		once.Do(func() { fmt.Fprintf(b.e.stderr, "%v\n", err) })
	})
	return err
}

func newBencher(e *env, o benchOptions) (*bencher, error) {
	log := slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	return &bencher{e: e, o: o, log: log, stats: &sqlStats{byQuery: map[string]*sqlStat{}}}, nil
}

func (b *bencher) driverName() string {
	switch {
	case strings.HasPrefix(b.o.dsn, "sqlite"):
		return "sqlite"
	case strings.HasPrefix(b.o.dsn, "mysql"):
		return "mysql"
	}
	return "postgres"
}

// benchDB is a fresh database: a schema or a file that exists for one
// measurement.
type benchDB struct {
	b       *bencher
	dsn     string
	drop    func()
	clients []*bq.Client
	pools   []*pgxpool.Pool
	// PostgreSQL: the schema, the pool that made it, and with
	// --table-stats the measurement of its tables begun after migrating.
	schema string
	admin  *pgxpool.Pool
	tables *pgstats.Measurement
	// directDSN is dsn straight to the server, past --net-delay's proxy
	// (dsn itself without the flag): for the parent's untimed reads.
	directDSN string
}

// freshDB creates an empty, migrated database and returns it.
func (b *bencher) freshDB(ctx context.Context) (*benchDB, error) {
	db := &benchDB{b: b}
	suffix := randomSuffix()
	if b.driverName() == "sqlite" {
		parent := ""
		if _, rest, _ := strings.Cut(b.o.dsn, ":"); strings.TrimPrefix(rest, "//") != "" {
			parent = filepath.Dir(strings.TrimPrefix(rest, "//"))
		}
		dir, err := os.MkdirTemp(parent, "bq-bench-")
		if err != nil {
			return nil, fmt.Errorf("bench: create a temporary directory: %w", err)
		}
		db.dsn = "sqlite://" + filepath.Join(dir, "bench.db")
		db.drop = func() { os.RemoveAll(dir) }
	} else if b.driverName() == "mysql" {
		if err := b.freshMySQL(db, suffix); err != nil {
			return nil, err
		}
	} else {
		admin, err := pgxpool.New(ctx, b.o.dsn)
		if err != nil {
			return nil, fmt.Errorf("bench: connect to %s: %w", humanize.RedactDSN(b.o.dsn), err)
		}
		schema := "bench_" + suffix
		db.schema, db.admin = schema, admin
		if _, err := admin.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
			admin.Close()
			return nil, fmt.Errorf("bench: create schema %s: %w", schema, err)
		}
		sep := "?"
		if strings.Contains(b.o.dsn, "?") {
			sep = "&"
		}
		db.dsn = b.o.dsn + sep + "search_path=" + schema
		db.drop = func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if _, err := admin.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
				fmt.Fprintf(b.e.stderr, "bench: drop schema %s: %v\n", schema, err)
			}
			admin.Close()
		}
	}
	db.directDSN = db.dsn
	if b.net != nil && b.driverName() != "sqlite" {
		dsn, _, err := netDelayDSN(db.dsn, b.net.addr())
		if err != nil {
			db.close()
			return nil, err
		}
		db.dsn = dsn
	}
	c, err := db.client(ctx)
	if err != nil {
		db.close()
		return nil, err
	}
	if err := c.Migrate(ctx); err != nil {
		db.close()
		return nil, err
	}
	if b.o.fair || b.o.maxActive > 0 {
		if err := c.SyncPolicies(ctx, "bench", []bq.Policy{{Queue: benchQueue, FairShare: b.o.fair, MaxActive: b.o.maxActive}}); err != nil {
			db.close()
			return nil, fmt.Errorf("bench: store the queue's policy: %w", err)
		}
	}
	if b.o.tableStats {
		if db.tables, err = pgstats.Begin(ctx, db.admin, db.schema, b.o.autovacuum == "on"); err != nil {
			db.close()
			return nil, fmt.Errorf("bench: %w", err)
		}
	}
	return db, nil
}

// client opens a client on the database, as bq.Open would; on PostgreSQL
// its pool carries the statement tracer when --sql-stats asks for it.
func (db *benchDB) client(ctx context.Context) (*bq.Client, error) {
	cfg := db.b.o.clientConfig(db.b.log)
	var c *bq.Client
	var err error
	if db.b.driverName() != "postgres" {
		c, err = bq.Open(ctx, db.dsn, cfg)
	} else {
		var pc *pgxpool.Config
		if pc, err = pgxpool.ParseConfig(db.dsn); err != nil {
			return nil, err
		}
		if db.b.o.sqlStats {
			pc.ConnConfig.Tracer = db.b.stats
		}
		// Named, so that --table-stats can wait for them to close.
		pc.ConnConfig.RuntimeParams["application_name"] = pgstats.AppName(db.schema)
		if db.b.plans != nil {
			db.b.plans.attach(pc)
		}
		var pool *pgxpool.Pool
		if pool, err = pgxpool.NewWithConfig(ctx, pc); err != nil {
			return nil, err
		}
		db.pools = append(db.pools, pool)
		c, err = bq.NewClient(postgres.New(pool), cfg)
	}
	if err != nil {
		return nil, err
	}
	db.clients = append(db.clients, c)
	return c, nil
}

func (db *benchDB) close() {
	db.closeClients()
	db.drop()
}

func (db *benchDB) closeClients() {
	for _, c := range db.clients {
		c.Close()
	}
	for _, p := range db.pools {
		p.Close()
	}
	db.clients, db.pools = nil, nil
}

// tableStats ends the --table-stats measurement: it closes the run's
// clients, whose connections report their last counts as they go, and
// reads the tables.
func (db *benchDB) tableStats(ctx context.Context) (*pgstats.Report, error) {
	db.closeClients()
	r, err := db.tables.End(ctx)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	return r, nil
}

func randomSuffix() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// freshMySQL creates database bench_<suffix> on the --dsn server and
// points db at it; it is dropped afterwards.
func (b *bencher) freshMySQL(db *benchDB, suffix string) error {
	// ParseURL first: its errors show the DSN redacted, url.Parse's whole.
	cfg, err := bqmysql.ParseURL(b.o.dsn)
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	u, err := url.Parse(b.o.dsn)
	if err != nil {
		return fmt.Errorf("bench: parse --dsn %s", humanize.RedactDSN(b.o.dsn))
	}
	admin, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return fmt.Errorf("bench: connect to %s: %w", humanize.RedactDSN(b.o.dsn), err)
	}
	name := "bench_" + suffix
	if _, err := admin.Exec("CREATE DATABASE " + name); err != nil {
		admin.Close()
		return fmt.Errorf("bench: create database %s: %w", name, err)
	}
	u.Path = "/" + name
	db.dsn = u.String()
	db.drop = func() {
		if _, err := admin.Exec("DROP DATABASE " + name); err != nil {
			fmt.Fprintf(b.e.stderr, "bench: drop database %s: %v\n", name, err)
		}
		admin.Close()
	}
	return nil
}

// openMySQLAdmin opens one connection's pool on the MySQL database of
// dsn, for a run's untimed reads, and returns the database's name.
func openMySQLAdmin(dsn string) (*sql.DB, string, error) {
	cfg, err := bqmysql.ParseURL(dsn)
	if err != nil {
		return nil, "", err
	}
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return nil, "", err
	}
	db.SetMaxOpenConns(1)
	return db, cfg.DBName, nil
}

// planLog is --plans: auto_explain, loaded in every connection of the
// run's clients, logs the plan of each statement the connection runs as
// a notice, which goes to the file with the time and the backend.
type planLog struct {
	mu  sync.Mutex
	out *os.File
	t0  time.Time
}

func openPlanLog(path string) (*planLog, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("bench: --plans: %w", err)
	}
	return &planLog{out: f, t0: time.Now()}, nil
}

// autoExplainSQL loads auto_explain into a session (a superuser's, or the
// library in $libdir/plugins) and has it send every plan, with ANALYZE
// and BUFFERS, to the client as a notice.
var autoExplainSQL = []string{"LOAD 'auto_explain'", "SET auto_explain.log_min_duration = 0", "SET auto_explain.log_analyze = on",
	"SET auto_explain.log_buffers = on", "SET auto_explain.log_level = notice"}

// attach makes every connection of pc log its plans to l.
func (l *planLog) attach(pc *pgxpool.Config) {
	pc.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		for _, q := range autoExplainSQL {
			if _, err := c.Exec(ctx, q); err != nil {
				return fmt.Errorf("bench: --plans: %s: %w", q, err)
			}
		}
		return nil
	}
	pc.ConnConfig.OnNotice = func(c *pgconn.PgConn, n *pgconn.Notice) {
		l.mu.Lock()
		defer l.mu.Unlock()
		fmt.Fprintf(l.out, "-- bq bench --plans: %.3f s, backend %d\n%s\n", time.Since(l.t0).Seconds(), c.PID(), n.Message)
	}
}

func (l *planLog) close() error {
	if l == nil {
		return nil
	}
	return l.out.Close()
}
