package main

import (
	"context"
	"fmt"
	"text/tabwriter"

	"github.com/bqueue/bq"
	"github.com/bqueue/bq/internal/humanize"
)

func runMigrate(ctx context.Context, e *env, args []string) error {
	f := newFlagSet(e, "migrate", "migrate up|down|status --dsn DSN [--prefix bq_]",
		`Manages bq's tables. "up" applies every pending migration, "down" rolls
back the newest applied one, "status" lists every migration and whether it
is applied.`)
	var db dbFlags
	db.register(f)
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return f.fail("want exactly one action (up, down or status), got %d", len(pos))
	}
	action := pos[0]
	if action != "up" && action != "down" && action != "status" {
		return f.fail("unknown action %q: use up, down or status", action)
	}
	if err := db.validate(f); err != nil {
		return err
	}
	open := db.open
	if action == "up" {
		open = db.create
	}
	client, err := open(ctx, bq.Config{})
	if err != nil {
		return err
	}
	defer client.Close()

	switch action {
	case "status":
		ms, err := client.MigrationStatus(ctx)
		if err != nil {
			return err
		}
		return printMigrations(e, ms)
	case "up":
		ms, err := client.MigrationStatus(ctx)
		if err != nil {
			return err
		}
		if pending(ms) == 0 {
			fmt.Fprintf(e.stdout, "migrate up: nothing to do; tables %s* are already at the latest version, %d\n", db.prefix, appliedVersion(ms))
			return nil
		}
		if err := client.Migrate(ctx); err != nil {
			return err
		}
	case "down":
		ms, err := client.MigrationStatus(ctx)
		if err != nil {
			return err
		}
		if appliedVersion(ms) == 0 {
			fmt.Fprintf(e.stdout, "migrate down: nothing to roll back; no migration of tables %s* is applied\n", db.prefix)
			return nil
		}
		if err := client.MigrateDown(ctx); err != nil {
			return err
		}
	}
	ms, err := client.MigrationStatus(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "migrate %s: done; tables %s* are at version %d (latest %d)\n",
		action, db.prefix, appliedVersion(ms), latestVersion(ms))
	return nil
}

// appliedVersion is the newest applied migration's version, 0 for none.
func appliedVersion(ms []bq.Migration) int64 {
	var v int64
	for _, m := range ms {
		if m.Applied {
			v = max(v, m.Version)
		}
	}
	return v
}

// pending counts the migrations not applied.
func pending(ms []bq.Migration) int {
	n := 0
	for _, m := range ms {
		if !m.Applied {
			n++
		}
	}
	return n
}

func latestVersion(ms []bq.Migration) int64 {
	var v int64
	for _, m := range ms {
		v = max(v, m.Version)
	}
	return v
}

func printMigrations(e *env, ms []bq.Migration) error {
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "VERSION\tNAME\tAPPLIED\tAPPLIED AT")
	for _, m := range ms {
		applied, at := "no", "-"
		if m.Applied {
			applied = "yes"
			if !m.AppliedAt.IsZero() {
				at = humanize.Time(m.AppliedAt)
			}
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", m.Version, m.Name, applied, at)
	}
	return tw.Flush()
}
