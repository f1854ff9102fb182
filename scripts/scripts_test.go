// Package scripts holds the set-up scripts `make test` runs; this test
// runs their decisions against stubs, so that nothing is installed or
// reconfigured: which server's authentication they loosen, which
// PostgreSQL cluster they pick, when they install a C compiler.
package scripts

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// sandbox runs script in bash with the set-up script source sourced
// (which defines its functions and runs nothing), markers in a fresh
// directory, and stub commands: every name in stubs is an executable on
// PATH that logs its command line to $CALLS and prints the stub's text.
// It returns the combined output, the logged calls and the exit error.
func sandbox(t *testing.T, source, script string, stubs map[string]string) (out, calls string, err error) {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	callLog := filepath.Join(dir, "calls")
	for name, text := range stubs {
		body := "#!/bin/sh\necho \"" + name + " $*\" >> \"$CALLS\"\n" + text + "\n"
		if err := os.WriteFile(filepath.Join(bin, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	wd, _ := os.Getwd()
	cmd := exec.Command("bash", "-c", "set -euo pipefail\n. "+filepath.Join(wd, source)+"\n"+script)
	cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "CALLS="+callLog,
		"BQ_SETUP_STATE="+filepath.Join(dir, "state"), "SANDBOX="+dir)
	o, err := cmd.CombinedOutput()
	logged, _ := os.ReadFile(callLog)
	return string(o), string(logged), err
}

// asRoot replaces as_root: the test runs the commands as itself.
const asRoot = "as_root() { \"$@\"; }\n"

// TestMariaDBRootOnlyOnOwnServer: root@127.0.0.1 without a password is
// created on a MariaDB the script installed (marker), never on another.
func TestMariaDBRootOnlyOnOwnServer(t *testing.T) {
	// TCP logins fail until the socket login has created the user.
	script := asRoot + `sql() { [ -e "$SANDBOX/created" ]; }
mysql() { echo "mysql $*" >> "$CALLS"; touch "$SANDBOX/created"; }
`
	out, calls, err := sandbox(t, "ensure-mariadb.sh", script+"allow_root_tcp", nil)
	if err == nil || !strings.Contains(out, "this script did not install this server, so it creates no such user") || calls != "" {
		t.Errorf("a MariaDB the script did not install: %v, calls %q\n%s\nwant a refusal and no CREATE USER", err, calls, out)
	}
	out, calls, err = sandbox(t, "ensure-mariadb.sh", script+"mark_installed mariadb\nallow_root_tcp", nil)
	if err != nil || !strings.Contains(calls, "CREATE USER IF NOT EXISTS 'root'@'127.0.0.1'") ||
		!strings.Contains(out, "without a password (a server this script installed)") {
		t.Errorf("a MariaDB the script installed: %v, calls %q\n%s\nwant the user created, and said", err, calls, out)
	}
	// Installing leaves the marker.
	out, _, err = sandbox(t, "ensure-mariadb.sh", asRoot+`MARIADBD=/bin/sh
install_mariadb
installed_here mariadb`, map[string]string{"apt-get": ""})
	if err != nil || !strings.Contains(out, "installed mariadb (marker ") {
		t.Errorf("install_mariadb: %v\n%s\nwant the marker left and said", err, out)
	}
}

// TestPostgresTrustOnlyOnOwnServer: pg_hba.conf is rewritten to trust on
// a PostgreSQL the script installed, never on another; apt-get update
// runs before apt-get install.
func TestPostgresTrustOnlyOnOwnServer(t *testing.T) {
	setup := asRoot + `pg_etc="$SANDBOX/etc"
mkdir -p "$pg_etc/15/main"
printf 'local all postgres peer\nhost all all 127.0.0.1/32 scram-sha-256\n' > "$pg_etc/15/main/pg_hba.conf"
pg_up() { true; }
pg_sql() { grep -q trust "$pg_etc/15/main/pg_hba.conf" && echo 1; }
`
	stubs := map[string]string{"pg_lsclusters": "echo '15 main 5432 online postgres /x /y'", "pg_ctlcluster": ""}
	out, calls, err := sandbox(t, "ensure-databases.sh", setup+`(ensure_postgres) || echo "refused: $?"
cat "$pg_etc/15/main/pg_hba.conf"`, stubs)
	if err != nil || !strings.Contains(out, "did not install this server, so it leaves its pg_hba.conf alone") || !strings.Contains(out, "refused: 1") ||
		!strings.Contains(out, "host all all 127.0.0.1/32 scram-sha-256") || strings.Contains(calls, "reload") {
		t.Errorf("a PostgreSQL the script did not install: %v, calls %q\n%s\nwant a refusal and pg_hba.conf unchanged", err, calls, out)
	}
	out, calls, err = sandbox(t, "ensure-databases.sh", setup+`mark_installed postgresql
ensure_postgres
cat "$pg_etc/15/main/pg_hba.conf"`, stubs)
	if err != nil || !strings.Contains(out, "trusting local connections in") || !strings.Contains(out, "host all all 127.0.0.1/32 trust") ||
		!strings.Contains(calls, "pg_ctlcluster --skip-systemctl-redirect 15 main reload") {
		t.Errorf("a PostgreSQL the script installed: %v, calls %q\n%s\nwant pg_hba.conf trusting, reloaded, and said", err, calls, out)
	}
	out, calls, err = sandbox(t, "ensure-databases.sh", asRoot+`pg_etc="$SANDBOX/etc"
mkdir -p "$pg_etc/15"
install_postgres`, map[string]string{"apt-get": ""})
	if err != nil || !strings.Contains(calls, "apt-get update -qq\napt-get install -y -qq postgresql") || !strings.Contains(out, "installed postgresql (marker") {
		t.Errorf("install_postgres: %v, calls %q\n%s\nwant apt-get update, then install, and the marker", err, calls, out)
	}
}

// TestPostgresClusterByPort: the cluster started is the one configured on
// the tests' port, the newest by version order (9.6 before 10), and the
// newest version installed is found the same way.
func TestPostgresClusterByPort(t *testing.T) {
	out, _, err := sandbox(t, "ensure-databases.sh", `pg_etc="$SANDBOX/etc"
mkdir -p "$pg_etc/9.6" "$pg_etc/10" "$pg_etc/15"
echo "port: $(port_cluster)"
echo "newest: $(newest_pg_version)"`, map[string]string{"pg_lsclusters": `printf '%s\n' '10 main 5432 down postgres /a /b' '9.6 main 5432 online postgres /a /b' '15 main 5433 online postgres /a /b'`})
	if err != nil || !strings.Contains(out, "port: 10 main\n") || !strings.Contains(out, "newest: 15\n") {
		t.Errorf("port_cluster / newest_pg_version: %v\n%s\nwant 10 main on port 5432, newest 15", err, out)
	}
}

// TestEnsureCC: a machine whose gcc cannot build gets gcc and libc6-dev
// from apt-get, after apt-get update; one that can build is left alone.
func TestEnsureCC(t *testing.T) {
	stubs := map[string]string{"go": "echo gcc", "apt-get": "touch \"$SANDBOX/gcc-installed\""}
	fakeCompile := `can_compile() { [ -e "$SANDBOX/gcc-installed" ]; }
gcc() { echo "gcc (Debian) 12"; }
`
	out, calls, err := sandbox(t, "ensure-cc.sh", asRoot+fakeCompile+"main", stubs)
	if err != nil || !strings.Contains(calls, "apt-get update -qq\napt-get install -y -qq gcc libc6-dev") || !strings.Contains(out, "installed gcc (Debian) 12") {
		t.Errorf("no C compiler: %v, calls %q\n%s\nwant apt-get update, then gcc and libc6-dev installed", err, calls, out)
	}
	out, calls, err = sandbox(t, "ensure-cc.sh", asRoot+"can_compile() { true; }\nmain", stubs)
	if err != nil || strings.Contains(calls, "apt-get") {
		t.Errorf("a working C compiler: %v, calls %q\n%s\nwant nothing installed", err, calls, out)
	}
	out, _, err = sandbox(t, "ensure-cc.sh", asRoot+"can_compile() { false; }\nmain", map[string]string{"go": "echo clang"})
	if err == nil || !strings.Contains(out, "(CC=clang) cannot build") {
		t.Errorf("a broken CC of the user's: %v\n%s\nwant a refusal naming it", err, out)
	}
}

// TestEnsurePgbench: a missing pgbench is installed with the server's
// major version's package (Debian ships it there), postgresql-contrib
// when the server cannot be asked; a working one is left alone, and
// nothing is done when PostgreSQL is not among the drivers.
func TestEnsurePgbench(t *testing.T) {
	stubs := map[string]string{
		"pgbench": `[ -e "$SANDBOX/pgbench-installed" ] || exit 1; echo "pgbench (PostgreSQL) 15.20"`,
		"psql":    "echo 150020",
		"apt-get": `touch "$SANDBOX/pgbench-installed"`,
	}
	out, calls, err := sandbox(t, "ensure-pgbench.sh", asRoot+"main", stubs)
	if err != nil || !strings.Contains(calls, "apt-get update -qq\napt-get install -y -qq postgresql-15\n") || !strings.Contains(out, "pgbench: pgbench (PostgreSQL) 15.20") {
		t.Errorf("no pgbench: %v, calls %q\n%s\nwant postgresql-15 installed", err, calls, out)
	}
	stubs["psql"] = "exit 2"
	_, calls, err = sandbox(t, "ensure-pgbench.sh", asRoot+"main", stubs)
	if err != nil || !strings.Contains(calls, "apt-get install -y -qq postgresql-contrib\n") {
		t.Errorf("no pgbench, no answer from the server: %v, calls %q\nwant postgresql-contrib installed", err, calls)
	}
	_, calls, err = sandbox(t, "ensure-pgbench.sh", asRoot+`touch "$SANDBOX/pgbench-installed"; main`, stubs)
	if err != nil || strings.Contains(calls, "apt-get") {
		t.Errorf("a working pgbench: %v, calls %q\nwant nothing installed", err, calls)
	}
	_, calls, err = sandbox(t, "ensure-pgbench.sh", asRoot+"drivers=sqlite,mysql; main", stubs)
	if err != nil || calls != "" {
		t.Errorf("PostgreSQL not selected: %v, calls %q\nwant nothing run", err, calls)
	}
	stubs["apt-get"] = ""
	out, _, err = sandbox(t, "ensure-pgbench.sh", asRoot+"main", stubs)
	if err == nil || !strings.Contains(out, "but pgbench still does not run") {
		t.Errorf("an install that brought no pgbench: %v\n%s\nwant a failure saying so", err, out)
	}
}

// TestEnsurePgbouncer: a missing pgbouncer is installed with apt-get,
// after apt-get update; a working one is left alone; nothing is done
// when PostgreSQL is not among the drivers; an install that brings no
// working binary, or a BQ_PGBOUNCER that does not run, fails.
func TestEnsurePgbouncer(t *testing.T) {
	// The binary the script finds is the stub on PATH: it runs once
	// apt-get has "installed" it.
	stubs := map[string]string{
		"pgbouncer": `[ -e "$SANDBOX/pgbouncer-installed" ] || exit 1; echo "PgBouncer 1.18.0"`,
		"apt-get":   `touch "$SANDBOX/pgbouncer-installed"`,
	}
	out, calls, err := sandbox(t, "ensure-pgbouncer.sh", asRoot+"main", stubs)
	if err != nil || !strings.Contains(calls, "apt-get update -qq\napt-get install -y -qq pgbouncer\n") || !strings.Contains(out, "installed PgBouncer 1.18.0") {
		t.Errorf("no pgbouncer: %v, calls %q\n%s\nwant apt-get update, then pgbouncer installed", err, calls, out)
	}
	_, calls, err = sandbox(t, "ensure-pgbouncer.sh", asRoot+`touch "$SANDBOX/pgbouncer-installed"; main`, stubs)
	if err != nil || strings.Contains(calls, "apt-get") {
		t.Errorf("a working pgbouncer: %v, calls %q\nwant nothing installed", err, calls)
	}
	_, calls, err = sandbox(t, "ensure-pgbouncer.sh", asRoot+"drivers=sqlite,mysql; main", stubs)
	if err != nil || calls != "" {
		t.Errorf("PostgreSQL not selected: %v, calls %q\nwant nothing run", err, calls)
	}
	out, calls, err = sandbox(t, "ensure-pgbouncer.sh", asRoot+"BQ_PGBOUNCER=/nonexistent/pgbouncer; main", stubs)
	if err == nil || !strings.Contains(out, "BQ_PGBOUNCER=/nonexistent/pgbouncer does not run") || strings.Contains(calls, "apt-get") {
		t.Errorf("a BQ_PGBOUNCER that does not run: %v, calls %q\n%s\nwant a failure naming it, nothing installed", err, calls, out)
	}
	stubs["apt-get"] = ""
	out, _, err = sandbox(t, "ensure-pgbouncer.sh", asRoot+"main", stubs)
	if err == nil || !strings.Contains(out, "but it still does not run") {
		t.Errorf("an install that brought no pgbouncer: %v\n%s\nwant a failure saying so", err, out)
	}
}
