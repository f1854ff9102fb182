package testdb

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// PrivateMariaDB starts a MariaDB server of the test's own, from the
// mariadbd binary the test scripts install, on a free loopback port with
// a data directory in the test's temporary directory, and returns a
// mysql:// URL of its database `test` (user root, no password: the
// server skips its grant tables). extra is passed to mariadbd: server
// settings a test needs and must never set on the shared server (a
// character set default, init_connect). The server is stopped when the
// test ends. A machine without MariaDB's binaries fails the test, naming
// what to install: a check that needs its own server is never skipped.
func PrivateMariaDB(t testing.TB, extra ...string) string {
	t.Helper()
	install, err := exec.LookPath("mariadb-install-db")
	if err != nil {
		t.Fatalf("this test starts a MariaDB server of its own and needs mariadb-install-db and mariadbd: install mariadb-server (scripts/ensure-mariadb.sh does): %v", err)
	}
	server := "/usr/sbin/mariadbd"
	if p, err := exec.LookPath("mariadbd"); err == nil {
		server = p
	}
	dir, err := os.MkdirTemp("", "bq-mariadb-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	data := filepath.Join(dir, "data")
	args := []string{"--no-defaults", "--datadir=" + data, "--auth-root-authentication-method=normal", "--skip-test-db"}
	if os.Geteuid() == 0 {
		args = append(args, "--user=root")
	}
	if out, err := exec.Command(install, args...).CombinedOutput(); err != nil {
		t.Fatalf("mariadb-install-db: %v\n%s", err, out)
	}
	port := freePort(t)
	args = []string{"--no-defaults", "--datadir=" + data, "--socket=" + filepath.Join(dir, "sock"),
		"--port=" + strconv.Itoa(port), "--bind-address=127.0.0.1", "--skip-grant-tables", "--skip-name-resolve",
		"--pid-file=" + filepath.Join(dir, "pid"), "--log-error=" + filepath.Join(dir, "error.log"),
		"--innodb-buffer-pool-size=16M", "--innodb-log-file-size=8M", "--skip-log-bin"}
	if os.Geteuid() == 0 {
		args = append(args, "--user=root")
	}
	cmd := exec.Command(server, append(args, extra...)...)
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", server, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	dsn := fmt.Sprintf("root@tcp(127.0.0.1:%d)/", port)
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err = db.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS test")
		cancel()
		if err == nil {
			break
		}
		select {
		case werr := <-done:
			log, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			t.Fatalf("the private MariaDB server exited (%v) before answering: %v\n%s", werr, err, log)
		default:
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			t.Fatalf("the private MariaDB server did not answer on 127.0.0.1:%d within 30 s: %v\n%s", port, err, log)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Sprintf("mysql://root@127.0.0.1:%d/test", port)
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
