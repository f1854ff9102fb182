// Package pgstats measures what a benchmark run leaves in PostgreSQL's
// tables: rows inserted, updated (HOT or not) and deleted, dead tuples not
// yet removed, autovacuum runs, and size on disk, for every table of one
// schema. bq bench and bench/river take it around a drain so that bq's and
// River's dead rows per job can be compared.
//
// A backend's counts reach pg_stat_user_tables in batches and at the
// latest when it exits, so a measurement ends by waiting for the run's own
// connections, tagged with an application_name, to be gone.
package pgstats

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// DB is what a measurement needs of a pool that is not the run's own
// (*pgxpool.Pool has it).
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// Change is one table's figures over a run: counts made during it, and
// what is left at its end.
type Change struct {
	Table        string `json:"table"`
	Inserted     int64  `json:"ins"`
	Updated      int64  `json:"upd"` // HOT updates included
	HOTUpdated   int64  `json:"hot_upd"`
	Deleted      int64  `json:"del"`
	DeadLeft     int64  `json:"dead_left"` // n_dead_tup at the end
	Autovacuums  int64  `json:"autovacuums"`
	Autoanalyzes int64  `json:"autoanalyzes"`
	Bytes        int64  `json:"bytes"`       // table, TOAST and indexes at the end
	IndexBytes   int64  `json:"index_bytes"` // of which indexes
	Grown        int64  `json:"grown"`       // Bytes minus Bytes at the start
}

// DeadMade is the dead tuples the run made: every updated or deleted row
// leaves its old version behind until pruning or vacuum removes it.
func (c Change) DeadMade() int64 { return c.Updated + c.Deleted }

// Settings are the server's autovacuum settings, which decide whether
// dead tuples were removed during the run.
type Settings struct {
	Version     string `json:"version"`
	Autovacuum  string `json:"autovacuum"`
	Naptime     string `json:"naptime"`
	ScaleFactor string `json:"vacuum_scale_factor"`
	Threshold   string `json:"vacuum_threshold"`
	CostDelay   string `json:"vacuum_cost_delay"`
}

// Report is one run's measurement.
type Report struct {
	// Autovacuum is the tables' own setting during the run: "off" when
	// the run disabled it on them, "on" when the server's applied.
	Autovacuum string   `json:"autovacuum"`
	Server     Settings `json:"server"`
	Tables     []Change `json:"tables"`
}

// Total adds up every table.
func (r *Report) Total() Change {
	t := Change{Table: "all"}
	for _, c := range r.Tables {
		t.Inserted += c.Inserted
		t.Updated += c.Updated
		t.HOTUpdated += c.HOTUpdated
		t.Deleted += c.Deleted
		t.DeadLeft += c.DeadLeft
		t.Autovacuums += c.Autovacuums
		t.Autoanalyzes += c.Autoanalyzes
		t.Bytes += c.Bytes
		t.IndexBytes += c.IndexBytes
		t.Grown += c.Grown
	}
	return t
}

// AppName is the application_name a run's connections carry, so that
// End can wait for them to be gone.
func AppName(schema string) string { return "pgstats-" + schema }

// Measurement is a run under way on one schema.
type Measurement struct {
	db         DB
	schema     string
	autovacuum string
	server     Settings
	before     map[string]Change
}

// Begin starts measuring schema's tables, already migrated and empty of
// work. With autovacuum false it disables autovacuum on each of them (for
// the benchmark's own schema only), so the dead tuples counted at the end
// are all the run made.
func Begin(ctx context.Context, db DB, schema string, autovacuum bool) (*Measurement, error) {
	m := &Measurement{db: db, schema: schema, autovacuum: "on"}
	var err error
	if m.server, err = serverSettings(ctx, db); err != nil {
		return nil, err
	}
	if !autovacuum {
		m.autovacuum = "off"
		if err := disableAutovacuum(ctx, db, schema); err != nil {
			return nil, err
		}
	}
	if m.before, err = snapshot(ctx, db, schema); err != nil {
		return nil, err
	}
	return m, nil
}

// End waits for the run's connections (those named AppName(schema)) to
// be closed, so their counts have been reported, and returns what changed
// since Begin.
func (m *Measurement) End(ctx context.Context) (*Report, error) {
	if err := waitGone(ctx, m.db, AppName(m.schema)); err != nil {
		return nil, err
	}
	after, err := snapshot(ctx, m.db, m.schema)
	if err != nil {
		return nil, err
	}
	r := &Report{Autovacuum: m.autovacuum, Server: m.server}
	for _, name := range slices.Sorted(maps.Keys(after)) {
		a, b := after[name], m.before[name]
		r.Tables = append(r.Tables, Change{Table: name,
			Inserted: a.Inserted - b.Inserted, Updated: a.Updated - b.Updated,
			HOTUpdated: a.HOTUpdated - b.HOTUpdated, Deleted: a.Deleted - b.Deleted,
			DeadLeft: a.DeadLeft, Autovacuums: a.Autovacuums - b.Autovacuums,
			Autoanalyzes: a.Autoanalyzes - b.Autoanalyzes,
			Bytes:        a.Bytes, IndexBytes: a.IndexBytes, Grown: a.Bytes - b.Bytes})
	}
	return r, nil
}

func serverSettings(ctx context.Context, db DB) (Settings, error) {
	rows, err := db.Query(ctx, `SELECT current_setting('server_version'), current_setting('autovacuum'),
	current_setting('autovacuum_naptime'), current_setting('autovacuum_vacuum_scale_factor'),
	current_setting('autovacuum_vacuum_threshold'), current_setting('autovacuum_vacuum_cost_delay')`)
	if err != nil {
		return Settings{}, fmt.Errorf("pgstats: read autovacuum settings: %w", err)
	}
	s, err := pgx.CollectExactlyOneRow(rows, func(row pgx.CollectableRow) (Settings, error) {
		var s Settings
		err := row.Scan(&s.Version, &s.Autovacuum, &s.Naptime, &s.ScaleFactor, &s.Threshold, &s.CostDelay)
		return s, err
	})
	if err != nil {
		return Settings{}, fmt.Errorf("pgstats: read autovacuum settings: %w", err)
	}
	return s, nil
}

func disableAutovacuum(ctx context.Context, db DB, schema string) error {
	tables, err := snapshot(ctx, db, schema)
	if err != nil {
		return err
	}
	for name := range tables {
		if _, err := db.Exec(ctx, "ALTER TABLE "+pgx.Identifier{schema, name}.Sanitize()+
			" SET (autovacuum_enabled = false)"); err != nil {
			return fmt.Errorf("pgstats: disable autovacuum on %s.%s: %w", schema, name, err)
		}
	}
	return nil
}

// snapshot reads the cumulative counts and the sizes of schema's tables.
func snapshot(ctx context.Context, db DB, schema string) (map[string]Change, error) {
	rows, err := db.Query(ctx, `SELECT relname, n_tup_ins, n_tup_upd, n_tup_hot_upd, n_tup_del, n_dead_tup,
	autovacuum_count, autoanalyze_count, pg_total_relation_size(relid), pg_indexes_size(relid)
FROM pg_stat_user_tables WHERE schemaname = $1`, schema)
	if err != nil {
		return nil, fmt.Errorf("pgstats: read the statistics of schema %s: %w", schema, err)
	}
	out := map[string]Change{}
	var c Change
	_, err = pgx.ForEachRow(rows, []any{&c.Table, &c.Inserted, &c.Updated, &c.HOTUpdated, &c.Deleted, &c.DeadLeft,
		&c.Autovacuums, &c.Autoanalyzes, &c.Bytes, &c.IndexBytes}, func() error {
		out[c.Table] = c
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("pgstats: read the statistics of schema %s: %w", schema, err)
	}
	return out, nil
}

// waitGone waits until no backend carries application_name app.
func waitGone(ctx context.Context, db DB, app string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		rows, err := db.Query(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`, app)
		if err != nil {
			return fmt.Errorf("pgstats: wait for the run's connections to close: %w", err)
		}
		n, err := pgx.CollectExactlyOneRow(rows, pgx.RowTo[int])
		if err != nil {
			return fmt.Errorf("pgstats: wait for the run's connections to close: %w", err)
		}
		if n == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("pgstats: %d connections of %s still open: %w", n, app, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Print writes r as a table, with counts per job and per 1M jobs.
func (r *Report) Print(w io.Writer, jobs int) {
	fmt.Fprintf(w, "  tables (autovacuum %s on the tables, %s on the server): per job, and MB per 1M jobs\n",
		r.Autovacuum, r.Server.Autovacuum)
	fmt.Fprintf(w, "  %-28s %8s %8s %8s %8s %10s %10s %6s %10s\n",
		"table", "ins", "upd", "hot", "del", "dead made", "dead left", "av", "MB/1M")
	for _, c := range append(slices.Clone(r.Tables), r.Total()) {
		per := func(n int64) float64 { return float64(n) / float64(jobs) }
		fmt.Fprintf(w, "  %-28s %8.3f %8.3f %8.3f %8.3f %10.3f %10.3f %6d %10.1f\n", c.Table,
			per(c.Inserted), per(c.Updated), per(c.HOTUpdated), per(c.Deleted), per(c.DeadMade()), per(c.DeadLeft),
			c.Autovacuums, PerMillion(c.Grown, jobs)/(1<<20))
	}
}

// PerMillion scales n, measured over jobs jobs, to 1,000,000 jobs.
func PerMillion(n int64, jobs int) float64 { return float64(n) * 1e6 / float64(jobs) }
