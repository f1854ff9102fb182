package testdb

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// PrivatePostgresReplica starts a streaming replica of primary, a
// PrivatePostgres started with wal_level=replica (the default) and
// max_wal_senders above 0: a base backup of it (pg_basebackup -R, so the
// copy follows the primary as a hot standby) served on a port of its
// own. extra are -c settings, as for PrivatePostgres. Its DSN names its
// own port only; a test that fails over names both servers.
func PrivatePostgresReplica(t testing.TB, primary *Server, extra ...string) *Server {
	t.Helper()
	bin := postgresBin(t)
	s := newServer(t, "PostgreSQL replica")
	as := postgresUser(t, s.dir)
	data := filepath.Join(s.dir, "data")
	backup := as(exec.Command(filepath.Join(bin, "pg_basebackup"), "-h", "127.0.0.1", "-p", strconv.Itoa(primary.Port),
		"-U", "postgres", "-D", data, "-R", "-X", "stream", "-c", "fast"))
	if out, err := backup.CombinedOutput(); err != nil {
		t.Fatalf("pg_basebackup of the private primary: %v\n%s", err, out)
	}
	args := postgresArgs(s, data, extra)
	s.start = func() *exec.Cmd { return as(exec.Command(filepath.Join(bin, "postgres"), args...)) }
	s.stop = syscall.SIGINT
	s.ready = func(ctx context.Context) error {
		conn, err := pgx.Connect(ctx, fmt.Sprintf("postgres://postgres@127.0.0.1:%d/test?sslmode=disable", s.Port))
		if err != nil {
			return err
		}
		return conn.Close(ctx)
	}
	s.DSN = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/test?sslmode=disable", s.Port)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.launch()
	return s
}

// Kill ends the server at once (SIGKILL to the postmaster, as a crash of
// its host would end it: nothing is flushed, no session is told) and
// waits until it has exited.
func (s *Server) Kill() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.done
	s.cmd = nil
}

// Promote ends a replica's recovery: it becomes a primary that takes
// writes, on a new timeline. It returns once the promotion is done.
// A replay conflict (a replica catching up cancels the sessions in its
// way, the promoting one too) is tried again.
func (s *Server) Promote(ctx context.Context) error {
	var err error
	for range 5 {
		if err = s.promote(ctx); err == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return err
}

func (s *Server) promote(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, s.DSN)
	if err != nil {
		return fmt.Errorf("promote: %w", err)
	}
	defer conn.Close(ctx)
	var recovering bool
	if err := conn.QueryRow(ctx, "SELECT pg_is_in_recovery()").Scan(&recovering); err == nil && !recovering {
		return nil // promoted by an earlier try
	}
	var done bool
	if err := conn.QueryRow(ctx, "SELECT pg_promote(true, 60)").Scan(&done); err != nil || !done {
		return fmt.Errorf("promote: done %v: %v", done, err)
	}
	return nil
}

// SQL runs statements on the server's database `postgres` as the
// superuser (settings, replication status), each in its own implicit
// transaction.
func (s *Server) SQL(ctx context.Context, statements ...string) error {
	conn, err := pgx.Connect(ctx, fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", s.Port))
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	for _, q := range statements {
		if _, err := conn.Exec(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	return nil
}
