package mysql

import (
	"context"
	"database/sql"
	"slices"
	"strings"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/bqueue/bq/internal/driver"
)

// injectionKeys end their string literal when escaped for gbk: 0xbf 0x5c
// is one gbk character, so the quote after it is live.
var injectionKeys = []string{"\xbf' OR SLEEP(1) OR '", "\xbf' OR SLEEP(1) -- "}

func TestParseURLCharsets(t *testing.T) {
	const base = "mysql://u:secret@h:3306/d?"
	for _, query := range []string{
		"charset=gbk", "charset=big5", "charset=sjis", "charset=cp932", "charset=gb18030",
		"charset=GBK", "charset=utf8mb4,gbk", "charset=gbk,utf8mb4",
		"charset=gbk&interpolateParams=true",
		"collation=gbk_chinese_ci", "collation=sjis_bin", "collation=big5_chinese_ci&interpolateParams=true",
		"character_set_client=gbk", "character_set_client=%27cp932%27", "character_set_client=DEFAULT",
		"charset=utf8mb4&character_set_client=gbk",
		"charset=ucs2", // not known to be safe
		// The server ignores a variable name's case.
		"CHARACTER_SET_CLIENT=gbk", "Character_Set_Client=gbk", "character_set_CLIENT=%27sjis%27",
		"character_set_client=utf8mb4&CHARACTER_SET_CLIENT=gbk",
		"CHARSET=gbk", "Collation=gbk_chinese_ci",
	} {
		_, err := ParseURL(base + query)
		if err == nil {
			t.Errorf("%s: accepted with parameter interpolation on", query)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, "interpolat") || !strings.Contains(msg, "utf8mb4") || strings.Contains(msg, "secret") {
			t.Errorf("%s: %v; want an error naming the problem and the fix, without the password", query, err)
		}
		if _, derr := DSN(base + query); derr == nil {
			t.Errorf("%s: DSN accepted it", query)
		}
	}
	if _, err := ParseURL(base + "charset=gbk"); err == nil || !strings.Contains(err.Error(), "charset=gbk is unsafe") ||
		!strings.Contains(err.Error(), "interpolateParams=false") {
		t.Errorf("charset=gbk: %v; want it named, and interpolateParams=false offered", err)
	}

	for _, query := range []string{
		"charset=utf8mb4", "charset=utf8", "charset=utf8mb3", "charset=latin1", "charset=ascii", "charset=binary",
		"charset=gb2312", "charset=euckr", "charset=ujis", "charset=eucjpms", "charset=cp1251",
		"collation=utf8mb4_unicode_ci", "collation=latin1_swedish_ci", "character_set_client=utf8mb4",
		"charset=gbk&interpolateParams=false", "charset=sjis&interpolateParams=false&collation=sjis_bin",
	} {
		cfg, err := ParseURL(base + query)
		if err != nil {
			t.Errorf("%s: %v, want it accepted", query, err)
			continue
		}
		if strings.Contains(query, "interpolateParams=false") && cfg.InterpolateParams {
			t.Errorf("%s: interpolation on", query)
		}
	}

	// No character set named: utf8mb4, set again after the handshake.
	cfg, err := ParseURL(base + "timeout=1s")
	if err != nil {
		t.Fatal(err)
	}
	if dsn := cfg.FormatDSN(); !strings.Contains(dsn, "charset=utf8mb4") || !strings.Contains(dsn, "collation=utf8mb4_general_ci") {
		t.Errorf("no charset in the URL: DSN %s, want charset=utf8mb4 and collation=utf8mb4_general_ci", dsn)
	}
	// One the URL names stays as it is.
	cfg, err = ParseURL(base + "charset=latin1")
	if err != nil {
		t.Fatal(err)
	}
	if dsn := cfg.FormatDSN(); !strings.Contains(dsn, "charset=latin1") || strings.Contains(dsn, "utf8mb4") {
		t.Errorf("charset=latin1: DSN %s", dsn)
	}
}

// On a real server: gbk with interpolation is refused (and the attack it
// stops is real); gbk without interpolation, and the default utf8mb4 with
// it, store the injection keys byte for byte and run no SLEEP.
func TestCharsetOnServer(t *testing.T) {
	ctx := context.Background()
	u := testURL(t)
	if _, err := Open(ctx, u+"?charset=gbk"); err == nil || !strings.Contains(err.Error(), "unsafe") {
		t.Fatalf("Open with charset=gbk: %v, want it refused", err)
	}

	t.Run("the attack is real", func(t *testing.T) {
		cfg, err := parseURL(u + "?charset=utf8mb4") // then gbk behind ParseURL's back
		if err != nil {
			t.Fatal(err)
		}
		if err := cfg.Apply(gomysql.Charset("gbk", "")); err != nil {
			t.Fatal(err)
		}
		conn, err := gomysql.NewConnector(cfg)
		if err != nil {
			t.Fatal(err)
		}
		db := sql.OpenDB(conn)
		defer db.Close()
		start := time.Now()
		var n int
		err = db.QueryRowContext(ctx, "SELECT COUNT(*) FROM (SELECT 1) t WHERE 'a' = ?", injectionKeys[1]).Scan(&n)
		if took := time.Since(start); err != nil || took < time.Second {
			t.Errorf("gbk with interpolation: %v after %s; want the key's SLEEP(1) to run (else the refusal may be relaxed)", err, took)
		}
	})

	for _, query := range []string{"?charset=gbk&interpolateParams=false", ""} {
		t.Run("URL "+query, func(t *testing.T) {
			d, err := Open(ctx, u+query)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			if _, err := d.DB().ExecContext(ctx, "DELETE FROM bq_semaphores"); err != nil {
				t.Fatal(err)
			}
			for _, key := range injectionKeys {
				start := time.Now()
				err := d.e().Exec().SemaphoreEnsure(ctx, driver.Limit{Key: key, To: 1, Duration: time.Minute}, time.Now())
				if took := time.Since(start); err != nil || took >= time.Second {
					t.Errorf("ensure %q: %v after %s", key, err, took)
				}
				if s, ok, err := d.e().Exec().SemaphoreGet(ctx, key); err != nil || !ok || s.Limit != 1 {
					t.Errorf("read %q: %+v, %v, %v", key, s, ok, err)
				}
			}
			rows, err := d.DB().QueryContext(ctx, "SELECT `key` FROM bq_semaphores")
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			var stored []string
			for rows.Next() {
				var k []byte
				if err := rows.Scan(&k); err != nil {
					t.Fatal(err)
				}
				stored = append(stored, string(k))
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			slices.Sort(stored)
			want := slices.Sorted(slices.Values(injectionKeys))
			if !slices.Equal(stored, want) {
				t.Errorf("stored keys %q, want exactly %q", stored, want)
			}
		})
	}
}

// Session variables are the server's, whose names ignore case: bq's own
// lookups see every spelling, and one variable spelled twice is refused.
func TestParseURLSessionVariableCase(t *testing.T) {
	const base = "mysql://u:secret@h:3306/d?"
	cfg, err := ParseURL(base + "Time_Zone=%27%2B01:00%27&WAIT_TIMEOUT=5")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Params["time_zone"] != "'+01:00'" || cfg.Params["wait_timeout"] != "5" {
		t.Errorf("params %v: want the URL's time_zone and wait_timeout kept, under their lower-case names", cfg.Params)
	}
	for k := range cfg.Params {
		if k != strings.ToLower(k) {
			t.Errorf("param %q kept its case beside bq's lower-case defaults", k)
		}
	}
	for _, query := range []string{"wait_timeout=5&WAIT_TIMEOUT=6", "sql_mode=%27%27&SQL_Mode=%27ANSI%27"} {
		if _, err := ParseURL(base + query); err == nil || !strings.Contains(err.Error(), "set twice") {
			t.Errorf("%s: %v, want it refused as set twice", query, err)
		}
	}
	for _, query := range []string{"PASSWORD=x", "Passwd=x", "password=x"} {
		if _, err := ParseURL(base + query); err == nil || !strings.Contains(err.Error(), "user part") {
			t.Errorf("%s: %v, want it refused (the server would run SET password)", query, err)
		}
	}
}

// The connector checks the session itself, whatever set its character
// set: here a SET inside the URL check's blind spot (a go-sql-driver
// config changed behind ParseURL's back) is refused at connect; and with
// NO_BACKSLASH_ESCAPES go-sql-driver escapes by doubling quotes, so keys
// full of quotes and backslashes are stored byte for byte.
func TestSessionCheckOnServer(t *testing.T) {
	ctx := context.Background()
	u := testURL(t)
	cfg, err := ParseURL(u)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Params["character_set_client"] = "gbk"
	conn, err := newConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(conn)
	err = db.PingContext(ctx)
	db.Close()
	if err == nil || !strings.Contains(err.Error(), "character_set_client is gbk") {
		t.Errorf("a gbk session with interpolation: %v, want it refused at connect", err)
	}

	c, err := Connector(u + "?sql_mode=%27NO_BACKSLASH_ESCAPES%27")
	if err != nil {
		t.Fatal(err)
	}
	d := New(sql.OpenDB(c))
	defer d.DB().Close()
	var mode string
	if err := d.DB().QueryRowContext(ctx, "SELECT @@session.sql_mode").Scan(&mode); err != nil || !strings.Contains(mode, "NO_BACKSLASH_ESCAPES") {
		t.Fatalf("sql_mode %q, %v", mode, err)
	}
	keys := []string{`a'b`, `a\'b`, `\`, `\'`, `''`, "\u4e3f' OR SLEEP(1) OR '", `x\`}
	for _, key := range keys {
		start := time.Now()
		if err := d.e().Exec().SemaphoreEnsure(ctx, driver.Limit{Key: key, To: 1, Duration: time.Minute}, time.Now()); err != nil {
			t.Fatalf("ensure %q: %v", key, err)
		}
		if took := time.Since(start); took >= time.Second {
			t.Errorf("ensure %q took %s", key, took)
		}
		if s, ok, err := d.e().Exec().SemaphoreGet(ctx, key); err != nil || !ok || s.Key != key {
			t.Errorf("read %q: %+v, %v, %v", key, s, ok, err)
		}
	}
}
