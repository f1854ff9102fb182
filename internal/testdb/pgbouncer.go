package testdb

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5"
)

// PgBouncer is a PgBouncer of a test's own (see Server) in pool_mode
// transaction, in front of the shared PostgreSQL server of
// PostgresBaseDSN: the configuration and log in a temporary directory, a
// free loopback port, trust authentication for the base DSN's user, and
// bq's DSNs through it from FreshPostgres. It changes nothing on the
// shared server but the schemas FreshPostgres makes and drops, and opens
// at most 4 connections to it per database (FreshPostgres), closed when
// the test that made the database ends.
type PgBouncer struct {
	*Server
	base *url.URL // the shared server

	mu    sync.Mutex
	dbs   []string // the [databases] lines
	write func()   // writes pgbouncer.ini
}

// PgBouncerBin is the pgbouncer binary the tests run: BQ_PGBOUNCER, else
// pgbouncer on PATH, else Debian's /usr/sbin/pgbouncer.
func PgBouncerBin(t testing.TB) string {
	t.Helper()
	if bin := os.Getenv("BQ_PGBOUNCER"); bin != "" {
		return bin
	}
	if p, err := exec.LookPath("pgbouncer"); err == nil {
		return p
	}
	if _, err := os.Stat("/usr/sbin/pgbouncer"); err == nil {
		return "/usr/sbin/pgbouncer"
	}
	t.Fatal("this test starts a PgBouncer of its own and needs the pgbouncer binary: install pgbouncer (scripts/ensure-pgbouncer.sh does; `make test` runs it), or set BQ_PGBOUNCER to its path")
	return ""
}

// PrivatePgBouncer starts a PgBouncer of the test's own in transaction
// mode in front of the shared PostgreSQL server, which must be reachable
// (it fails the test otherwise, as FreshPostgres does). extra are lines
// for its [pgbouncer] section (name = value). Run as root, it runs as the
// postgres user: PgBouncer refuses root.
func PrivatePgBouncer(t testing.TB, extra ...string) *PgBouncer {
	t.Helper()
	bin := PgBouncerBin(t)
	if _, err := pgAdmin(); err != nil {
		t.Fatalf("PostgreSQL is selected (BQ_TEST_DRIVERS) but unreachable at %s: %v", redacted(PostgresBaseDSN()), err)
	}
	base, err := url.Parse(PostgresBaseDSN())
	if err != nil || base.Host == "" {
		t.Fatalf("BQ_TEST_POSTGRES_DSN %s: PgBouncer needs a postgres://user@host:port/db URL", redacted(PostgresBaseDSN()))
	}
	s := newServer(t, "PgBouncer")
	cred := postgresCredential(t, s.dir)
	b := &PgBouncer{Server: s, base: base}
	name := base.User.Username()
	if name == "" {
		name = "postgres"
	}
	// trust still wants the client's user in auth_file.
	if err := os.WriteFile(filepath.Join(s.dir, "userlist.txt"), []byte(strconv.Quote(name)+` ""`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	settings := []string{
		"listen_addr = 127.0.0.1",
		"listen_port = " + strconv.Itoa(s.Port),
		"unix_socket_dir =",
		"auth_type = trust",
		"auth_file = " + filepath.Join(s.dir, "userlist.txt"),
		"admin_users = " + name,
		"pool_mode = transaction",
		"pidfile = " + filepath.Join(s.dir, "pgbouncer.pid"),
		"max_client_conn = 500",
		// The shared server has room for 100 connections, which the
		// suites running beside this one share: at most 4 per database
		// here, closed when its test ends (FreshPostgres).
		"default_pool_size = 4",
		"max_db_connections = 4",
		"server_idle_timeout = 10",
		"log_connections = 0",
		"log_disconnections = 0",
	}
	settings = append(settings, extra...)
	b.write = func() {
		text := "[databases]\n" + strings.Join(b.dbs, "\n") + "\n\n[pgbouncer]\n" + strings.Join(settings, "\n") + "\n"
		if err := os.WriteFile(filepath.Join(s.dir, "pgbouncer.ini"), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b.write()
	s.start = func() *exec.Cmd {
		cmd := exec.Command(bin, filepath.Join(s.dir, "pgbouncer.ini"))
		cmd.Dir = s.dir
		// A test binary killed before its cleanups (a closed pipe, a
		// timeout) takes its PgBouncer with it.
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGTERM}
		return cmd
	}
	s.stop = syscall.SIGTERM // PgBouncer's immediate shutdown
	s.ready = func(ctx context.Context) error { return b.admin(ctx, "SHOW VERSION") }
	s.DSN = "" // a DSN per database: FreshPostgres
	s.mu.Lock()
	defer s.mu.Unlock()
	s.launch()
	return b
}

// admin runs a command on PgBouncer's admin console.
func (b *PgBouncer) admin(ctx context.Context, command string) error {
	u := *b.base
	u.Host = "127.0.0.1:" + strconv.Itoa(b.Port)
	u.Path = "/pgbouncer"
	u.RawQuery = "sslmode=disable"
	conn, err := pgx.Connect(ctx, u.String())
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, command) // no arguments: the simple protocol, all the console speaks
	return err
}

// FreshPostgres is FreshPostgres through the bouncer: a schema of the
// test's own on the shared server, dropped when the test ends, and a
// database of the bouncer whose server connections use it (connect_query
// sets search_path: PgBouncer passes no search_path from its clients). It
// returns bq's DSN of that database through the bouncer; with listen, its
// listen_dsn names the shared server, directly.
func (b *PgBouncer) FreshPostgres(t testing.TB, listen bool) string {
	t.Helper()
	direct, err := url.Parse(FreshPostgres(t))
	if err != nil {
		t.Fatal(err)
	}
	schema := direct.Query().Get("search_path")
	server := *b.base
	host, port := server.Hostname(), server.Port()
	if port == "" {
		port = "5432"
	}
	line := fmt.Sprintf("%s = host=%s port=%s dbname=%s connect_query='SET search_path TO %s'",
		schema, quoteIni(host), port, quoteIni(strings.TrimPrefix(server.Path, "/")), schema)
	if u := server.User; u != nil {
		line += " user=" + quoteIni(u.Username())
		if p, ok := u.Password(); ok {
			line += " password=" + quoteIni(p)
		}
	}
	b.mu.Lock()
	b.dbs = append(b.dbs, line)
	b.write()
	err = b.admin(context.Background(), "RELOAD")
	b.mu.Unlock()
	if err != nil {
		t.Fatalf("reload the private PgBouncer with database %s: %v\n%s", schema, err, b.log())
	}
	// Before the schema is dropped: its server connections go at once.
	t.Cleanup(func() {
		if err := b.admin(context.Background(), "KILL "+schema); err != nil {
			t.Logf("close the private PgBouncer's connections to %s: %v", schema, err)
		}
	})
	u := *b.base
	u.Host = "127.0.0.1:" + strconv.Itoa(b.Port)
	u.Path = "/" + schema
	q := u.Query()
	q.Set("sslmode", "disable")
	if listen {
		d := *b.base
		q.Set("listen_dsn", d.String())
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// quoteIni quotes a value of PgBouncer's connection strings when it holds
// a space or a quote.
func quoteIni(v string) string {
	if !strings.ContainsAny(v, " '\"\\") && v != "" {
		return v
	}
	return "'" + strings.ReplaceAll(v, "'", "''") + "'"
}
