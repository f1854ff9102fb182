package testdb

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Server is a database server of a test's own: started from the
// binaries the test scripts install, on a free loopback port, its data in
// a temporary directory, stopped and removed when the test ends. Tests
// that change a server's settings, or stop and start it, use one and
// never touch the shared servers of BQ_TEST_POSTGRES_DSN and
// BQ_TEST_MYSQL_DSN. A machine without the binaries fails the test,
// naming what to install: a check that needs its own server is never
// skipped.
type Server struct {
	// DSN is bq's URL of the server's database `test`.
	DSN  string
	Port int

	t     testing.TB
	kind  string
	dir   string
	start func() *exec.Cmd
	ready func(context.Context) error
	stop  os.Signal

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan error
}

// Stop shuts the server down (a fast shutdown: sessions are ended,
// nothing in flight is kept) and waits until it has exited.
func (s *Server) Stop() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(s.stop)
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
		s.t.Errorf("the private %s server did not stop within 30 s: killed", s.kind)
	}
	s.cmd = nil
}

// Start starts the server again after Stop and returns once it accepts
// connections.
func (s *Server) Start() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.launch()
}

func (s *Server) launch() {
	s.t.Helper()
	cmd := s.start()
	log, err := os.OpenFile(filepath.Join(s.dir, "server.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		s.t.Fatal(err)
	}
	defer log.Close()
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("start the private %s server: %v", s.kind, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	s.cmd, s.done = cmd, done
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := s.ready(ctx)
		cancel()
		if err == nil {
			return
		}
		select {
		case werr := <-done:
			s.cmd = nil
			s.t.Fatalf("the private %s server exited (%v) before answering: %v\n%s", s.kind, werr, err, s.log())
		default:
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("the private %s server did not answer on 127.0.0.1:%d within 60 s: %v\n%s", s.kind, s.Port, err, s.log())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (s *Server) log() string {
	var out []byte
	for _, name := range []string{"server.log", "error.log"} {
		b, _ := os.ReadFile(filepath.Join(s.dir, name))
		out = append(out, b...)
	}
	return string(out)
}

func newServer(t testing.TB, kind string) *Server {
	t.Helper()
	dir, err := os.MkdirTemp("", "bq-"+kind+"-")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{t: t, kind: kind, dir: dir, Port: freePort(t)}
	t.Cleanup(func() {
		s.Stop()
		os.RemoveAll(dir)
	})
	return s
}

// PrivateMariaDB starts a MariaDB server of the test's own (see Server):
// user root without a password (the server skips its grant tables), a
// database `test`. extra is passed to mariadbd: settings a test needs and
// must never set on the shared server (a character set default,
// init_connect).
func PrivateMariaDB(t testing.TB, extra ...string) *Server {
	t.Helper()
	install := lookPath(t, "mariadb-install-db", "mariadb-server")
	server := "/usr/sbin/mariadbd"
	if p, err := exec.LookPath("mariadbd"); err == nil {
		server = p
	}
	s := newServer(t, "MariaDB")
	data := filepath.Join(s.dir, "data")
	args := []string{"--no-defaults", "--datadir=" + data, "--auth-root-authentication-method=normal", "--skip-test-db"}
	if os.Geteuid() == 0 {
		args = append(args, "--user=root")
	}
	if out, err := exec.Command(install, args...).CombinedOutput(); err != nil {
		t.Fatalf("mariadb-install-db: %v\n%s", err, out)
	}
	args = []string{"--no-defaults", "--datadir=" + data, "--socket=" + filepath.Join(s.dir, "sock"),
		"--port=" + strconv.Itoa(s.Port), "--bind-address=127.0.0.1", "--skip-grant-tables", "--skip-name-resolve",
		"--pid-file=" + filepath.Join(s.dir, "pid"), "--log-error=" + filepath.Join(s.dir, "error.log"),
		"--innodb-buffer-pool-size=32M", "--skip-log-bin"}
	if os.Geteuid() == 0 {
		args = append(args, "--user=root")
	}
	args = append(args, extra...)
	s.start = func() *exec.Cmd { return exec.Command(server, args...) }
	s.stop = syscall.SIGTERM // mariadbd's normal shutdown
	s.ready = func(ctx context.Context) error {
		db, err := sql.Open("mysql", fmt.Sprintf("root@tcp(127.0.0.1:%d)/", s.Port))
		if err != nil {
			return err
		}
		defer db.Close()
		_, err = db.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS test")
		return err
	}
	s.DSN = fmt.Sprintf("mysql://root@127.0.0.1:%d/test", s.Port)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.launch()
	return s
}

// PrivatePostgres starts a PostgreSQL server of the test's own (see
// Server), from the newest version under /usr/lib/postgresql: user
// postgres, trust authentication, a database `test`. Run as root, the
// server runs as the postgres user (PostgreSQL refuses root). extra are
// -c settings for the server (name=value).
func PrivatePostgres(t testing.TB, extra ...string) *Server {
	t.Helper()
	bin := postgresBin(t)
	s := newServer(t, "PostgreSQL")
	as := postgresUser(t, s.dir)
	data := filepath.Join(s.dir, "data")
	initdb := as(exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8",
		"--locale=C", "--no-sync"))
	if out, err := initdb.CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	args := postgresArgs(s, data, extra)
	s.start = func() *exec.Cmd { return as(exec.Command(filepath.Join(bin, "postgres"), args...)) }
	s.stop = syscall.SIGINT // PostgreSQL's fast shutdown
	s.ready = func(ctx context.Context) error {
		conn, err := pgx.Connect(ctx, fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", s.Port))
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		var exists bool
		if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_database WHERE datname = 'test')").Scan(&exists); err != nil || exists {
			return err
		}
		_, err = conn.Exec(ctx, "CREATE DATABASE test")
		return err
	}
	s.DSN = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/test?sslmode=disable", s.Port)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.launch()
	return s
}

// postgresBin is the bin directory of the newest PostgreSQL installed.
func postgresBin(t testing.TB) string {
	t.Helper()
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(bins) == 0 {
		t.Fatal("this test starts a PostgreSQL server of its own and needs initdb and postgres under /usr/lib/postgresql/*/bin: install postgresql (scripts/ensure-postgres.sh does)")
	}
	sort.Slice(bins, func(i, j int) bool { return version(bins[i]) < version(bins[j]) })
	return filepath.Dir(bins[len(bins)-1])
}

// postgresUser returns what makes a command run as the postgres user
// (when the tests run as root: PostgreSQL refuses root) in dir.
func postgresUser(t testing.TB, dir string) func(*exec.Cmd) *exec.Cmd {
	cred := postgresCredential(t, dir)
	return func(cmd *exec.Cmd) *exec.Cmd {
		if cred != nil {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		}
		cmd.Dir = dir
		return cmd
	}
}

// postgresArgs are the server's arguments: its data, its private port
// and socket directory, the test settings and then extra (-c
// name=value, later ones win).
func postgresArgs(s *Server, data string, extra []string) []string {
	args := []string{"-D", data, "-p", strconv.Itoa(s.Port), "-k", s.dir, "-c", "listen_addresses=127.0.0.1",
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off", "-c", "max_connections=200",
		"-c", "shared_buffers=32MB"}
	for _, e := range extra {
		args = append(args, "-c", e)
	}
	return args
}

// version reads the version directory of /usr/lib/postgresql/<v>/bin/x.
func version(path string) float64 {
	v, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(filepath.Dir(path))), 64)
	return v
}

func lookPath(t testing.TB, bin, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(bin)
	if err != nil {
		t.Fatalf("this test starts a server of its own and needs %s: install %s (the scripts of `make test` do): %v", bin, pkg, err)
	}
	return p
}

// postgresCredential is the postgres user's, which servers refusing root
// run as when the tests run as root, and gives it dir; nil otherwise.
func postgresCredential(t testing.TB, dir string) *syscall.Credential {
	t.Helper()
	if os.Geteuid() != 0 {
		return nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		t.Fatalf("PostgreSQL and PgBouncer refuse to run as root and there is no postgres user: %v", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := os.Chown(dir, uid, gid); err != nil {
		t.Fatal(err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
}

// freePort is a loopback TCP port free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
