package mysql

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
)

func TestParseURL(t *testing.T) {
	cfg, err := ParseURL("mysql://app:s%40cret%2Fx@db.internal:3307/jobs?timeout=5s&tls=skip-verify&sql_mode=%27TRADITIONAL%27")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.User != "app" || cfg.Passwd != "s@cret/x" || cfg.Net != "tcp" || cfg.Addr != "db.internal:3307" || cfg.DBName != "jobs" {
		t.Errorf("user %q pass %q net %q addr %q db %q", cfg.User, cfg.Passwd, cfg.Net, cfg.Addr, cfg.DBName)
	}
	if cfg.Timeout != 5*time.Second || cfg.TLSConfig != "skip-verify" || cfg.Params["sql_mode"] != "'TRADITIONAL'" {
		t.Errorf("extra parameters lost: timeout %s tls %q params %v", cfg.Timeout, cfg.TLSConfig, cfg.Params)
	}
	if !cfg.ParseTime || cfg.Loc != time.UTC || !cfg.InterpolateParams || cfg.Params["time_zone"] != "'+00:00'" {
		t.Errorf("defaults missing: parseTime %v loc %v interpolateParams %v time_zone %q",
			cfg.ParseTime, cfg.Loc, cfg.InterpolateParams, cfg.Params["time_zone"])
	}
	if cfg.Params["innodb_lock_wait_timeout"] != "10" || cfg.Params["wait_timeout"] != "10" {
		t.Errorf("session bounds missing: %v", cfg.Params)
	}

	cfg, err = ParseURL("mysql://root@localhost/test?parseTime=false&interpolateParams=false&time_zone=%27SYSTEM%27")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Addr != "localhost:3306" || cfg.ParseTime || cfg.InterpolateParams || cfg.Params["time_zone"] != "'SYSTEM'" {
		t.Errorf("the URL's own settings must win: addr %q parseTime %v interpolateParams %v time_zone %q",
			cfg.Addr, cfg.ParseTime, cfg.InterpolateParams, cfg.Params["time_zone"])
	}
	if cfg, err := ParseURL("mysql://[::1]/test"); err != nil || cfg.Addr != "[::1]:3306" {
		t.Errorf("IPv6 host: %v, %v", cfg, err)
	}
	if cfg, err := ParseURL("mysql:///test"); err != nil || cfg.Addr != "127.0.0.1:3306" {
		t.Errorf("no host: %v, %v", cfg, err)
	}

	dsn, err := DSN("mysql://u:p@h:3306/d?timeout=1s")
	if err != nil {
		t.Fatal(err)
	}
	if back, err := gomysql.ParseDSN(dsn); err != nil || back.Addr != "h:3306" || back.Passwd != "p" || !back.ParseTime ||
		back.Params["wait_timeout"] != "10" || back.Params["innodb_lock_wait_timeout"] != "10" {
		t.Errorf("DSN %q does not parse back: %v", dsn, err)
	}
}

func TestParseURLErrors(t *testing.T) {
	for dsn, want := range map[string]string{
		"mysql://u:secret@h:3306":            "name one database",
		"mysql://u:secret@h:3306/a/b":        "name one database",
		"mysql://u:secret@h:3306/d?tls=bad":  "parse MySQL DSN",
		"postgres://u:secret@h/d":            "want mysql://",
		"mysql://u:secret@h:port/d":          "parse MySQL DSN",
		"mysql://u@h:3306/d?password=secret": "belongs in the URL's user part",
		"mysql://u@h:3306/d?passwd=secret":   "belongs in the URL's user part",
	} {
		_, err := ParseURL(dsn)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error mentioning %q", dsn, err, want)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("%s: error %q leaks the password", dsn, err)
		}
	}
}

func TestCheckVersion(t *testing.T) {
	// Accepted: the versions bq runs on.
	for _, version := range []string{"8.0.36", "8.4.2-commercial", "9.1.0", "8.0.mysql_aurora.3.04.0", "10.6.18-MariaDB", "10.11.19-MariaDB-0+deb12u1", "11.4.2-MariaDB-log"} {
		if _, err := checkVersion(version); err != nil {
			t.Errorf("%s: %v, want it accepted", version, err)
		}
	}
	// Refused, each with its reason.
	for _, c := range []struct{ version, want string }{
		{"5.7.44-log", "runs MySQL 5.7.44-log; bq needs MySQL 8.0 or newer"},
		{"10.5.25-MariaDB-1:10.5.25", "runs MariaDB 10.5.25-MariaDB-1:10.5.25; bq needs MariaDB 10.6 or newer"},
		{"5.5.5-10.4.32-MariaDB", "bq needs MariaDB 10.6 or newer"},
		{"not a version", "cannot read the server version"},
	} {
		if _, err := checkVersion(c.version); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error mentioning %q", c.version, err, c.want)
		}
	}
	for version, want := range map[string]string{
		"8.0.36":          "transaction_isolation",
		"10.11.6-MariaDB": "tx_isolation",
		"11.1.2-MariaDB":  "transaction_isolation",
	} {
		if s, _ := checkVersion(version); s.isolationVariable() != want {
			t.Errorf("%s: isolation variable %q, want %q", version, s.isolationVariable(), want)
		}
	}
}

func TestRetryable(t *testing.T) {
	d := &engine{}
	for number, want := range map[uint16]bool{1213: true, 1205: true, 1020: true, 1062: false, 1146: false} {
		err := fmt.Errorf("claim: %w", &gomysql.MySQLError{Number: number, Message: "x"})
		if got := d.Retryable(err); got != want {
			t.Errorf("error %d: Retryable %v, want %v", number, got, want)
		}
	}
	if d.Retryable(errors.New("deadlock")) || d.Retryable(nil) {
		t.Error("an error that is not the server's is not retryable")
	}
}

func TestCheckKey(t *testing.T) {
	if err := checkKey(strings.Repeat("🔑", MaxKeyBytes/4)); err != nil {
		t.Errorf("key of exactly %d bytes: %v", MaxKeyBytes, err)
	}
	err := checkKey(strings.Repeat("🔑", MaxKeyBytes/4) + "x")
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("at most %d bytes", MaxKeyBytes)) || strings.Contains(err.Error(), `\x`) {
		t.Errorf("key one byte too long: %v, want an error naming the limit, quoting whole characters", err)
	}
}
