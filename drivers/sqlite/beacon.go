package sqlite

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/sqlexec"
)

// Beacons. A process frozen inside a write transaction holds SQLite's one
// write lock, and a process whose writes run back to back can win the lock
// at nearly every poll of another's busy handler: either way other
// processes' heartbeats cannot land in the database, and silence there is
// no proof of death. So each process also shows it is alive by setting the
// modification time of a file of its own in a directory beside the
// database, which no database lock can hold up. SQLite's WAL needs every
// process sharing a database on one host, so every dispatcher can see
// every beacon. A dispatcher counts a process as silent only when both its
// row and its beacon are.

// beaconDirOf is the directory of the database file's beacons.
func beaconDirOf(path string) string {
	if path == "" || path == ":memory:" {
		return ""
	}
	return path + "-bq-beacons"
}

// dbPath asks SQLite which file the main database is ("" in memory).
func dbPath(ctx context.Context, db sqlexec.DB) string {
	rows, err := db.QueryContext(ctx, "PRAGMA database_list")
	if err != nil {
		return ""
	}
	defer rows.Close()
	for rows.Next() {
		var seq int
		var name, file string
		if rows.Scan(&seq, &name, &file) == nil && name == "main" {
			return file
		}
	}
	return ""
}

func (d *engine) beaconPath(processID int64) string {
	return filepath.Join(d.beacons, d.prefix+strconv.FormatInt(processID, 10))
}

// Beacon sets the process's beacon to at, creating it if missing. The
// directory must be one this process's user owns and no one else may
// write to (a directory another local user made beside a shared
// database could otherwise hold beacons that keep dead processes from
// ever being reaped): bq creates it 0700, its files 0600, and never
// follows a symbolic link in it.
func (d *engine) Beacon(processID int64, at time.Time) error {
	if d.beacons == "" {
		return driver.ErrNoBeacon
	}
	if err := ensureBeaconDir(d.beacons); err != nil {
		return fmt.Errorf("beacon of process %d: %w", processID, err)
	}
	if err := touch(d.beaconPath(processID), at); err != nil {
		return fmt.Errorf("beacon of process %d: %w", processID, err)
	}
	return nil
}

// ensureBeaconDir creates the beacon directory (0700) or checks the one
// there: a real directory, not a link, owned by this process's user and
// writable by no one else.
func ensureBeaconDir(dir string) error {
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("create the beacon directory: %w", err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("check the beacon directory: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory (%v): remove it, and bq will create the directory of its beacons there", dir, fi.Mode().Type())
	}
	if err := checkOwner(dir, fi); err != nil {
		return err
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("the beacon directory %s can be written by other users (mode %v): another user could keep dead processes from being reaped; chmod go-w it (or remove it)",
			dir, fi.Mode().Perm())
	}
	return nil
}

// beaconAt is when the process last set its beacon; zero when it has
// none, or when its path is anything but a plain file.
func (d *engine) beaconAt(processID int64) time.Time {
	if d.beacons == "" {
		return time.Time{}
	}
	fi, err := os.Lstat(d.beaconPath(processID))
	if err != nil || !fi.Mode().IsRegular() {
		return time.Time{}
	}
	return fi.ModTime()
}

// removeBeacons deletes the beacons of processes whose rows are gone.
func (d *engine) removeBeacons(ids []int64) {
	for _, id := range ids {
		if d.beacons != "" {
			_ = os.Remove(d.beaconPath(id))
		}
	}
}

// aliveByBeacon reports whether the process's beacon is younger than
// silence at now: it is running, whatever its row says.
func (d *engine) aliveByBeacon(processID int64, now time.Time, silence time.Duration) bool {
	at := d.beaconAt(processID)
	return !at.IsZero() && now.Sub(at) <= silence
}

// deadProcesses lists the processes dead at now (driver package doc),
// by their rows and their beacons.
func (d *engine) deadProcesses(ctx context.Context, db sqlexec.DB, now time.Time, deadAfter time.Duration) ([]int64, error) {
	rows, err := db.QueryContext(ctx, d.dl.own.deadProcesses, sqlexec.Micros(now), deadAfter.Milliseconds())
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var dead []int64
	for rows.Next() {
		var id, silenceMS int64
		if err := rows.Scan(&id, &silenceMS); err != nil {
			return nil, err
		}
		if !d.aliveByBeacon(id, now, time.Duration(silenceMS)*time.Millisecond) {
			dead = append(dead, id)
		}
	}
	return dead, rows.Err()
}

// ProcessRegister sets the new process's beacon too.
func (e executor) ProcessRegister(ctx context.Context, p driver.Process) (int64, error) {
	id, err := e.Executor.ProcessRegister(ctx, p)
	if err != nil {
		return 0, err
	}
	if err := e.d.Beacon(id, p.StartedAt); err != nil && !errors.Is(err, driver.ErrNoBeacon) {
		return 0, fmt.Errorf("register process: %w", err)
	}
	return id, nil
}

// ProcessDeregister removes the process's beacon too.
func (e executor) ProcessDeregister(ctx context.Context, processID int64) error {
	if err := e.Executor.ProcessDeregister(ctx, processID); err != nil {
		return err
	}
	e.d.removeBeacons([]int64{processID})
	return nil
}

// ProcessList reports a beacon fresher than the row as the last beat.
func (e executor) ProcessList(ctx context.Context) ([]driver.Process, error) {
	out, err := e.Executor.ProcessList(ctx)
	for i, p := range out {
		if at := e.d.beaconAt(p.ID); at.After(p.LastHeartbeatAt) {
			out[i].LastHeartbeatAt = at
		}
	}
	return out, err
}

// PassLook reports a beacon fresher than the row as the last beat, as
// ProcessList does.
func (e executor) PassLook(ctx context.Context, now time.Time) (driver.PassWork, error) {
	w, err := e.Executor.PassLook(ctx, now)
	for i, b := range w.Beats {
		if at := e.d.beaconAt(b.ID); at.After(b.LastHeartbeatAt) {
			w.Beats[i].LastHeartbeatAt = at
		}
	}
	return w, err
}

var _ driver.Beaconer = (*engine)(nil)
