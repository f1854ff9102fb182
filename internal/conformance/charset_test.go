package conformance

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/bqueue/bq"
	"github.com/bqueue/bq/internal/testdb"
)

var _ = register(
	scenario{"UnsafeCharsetRefused", testUnsafeCharset},
	scenario{"AnyErrorTextIsRecorded", testAnyErrorText},
	scenario{"ServerDefaultCharsetRefused", testServerDefaultCharset},
)

// testAnyErrorText: a job whose error message holds a NUL byte and bytes
// that are not UTF-8 still ends failed, its message stored as valid text,
// on every database: an outcome that can never be written would keep its
// claim (and slot) forever.
func testAnyErrorText(t *testing.T, h *harness) {
	res := enqueue(t, h, badErrorJob, Args{})
	worker(h, 1)
	h.waitState(res.ID, bq.StateFailed)
	if msg := jobInfo(t, h, res.ID).LastError; msg != "nul \\x00 and \uFFFD here" ||
		strings.ContainsRune(msg, 0) || !utf8.ValidString(msg) {
		t.Errorf("stored error %q: want the message as valid UTF-8 without NUL", msg)
	}
}

// badErrorJob fails with a message no text column takes as it is: a NUL
// byte (PostgreSQL refuses it) and bytes that are not UTF-8.
var badErrorJob = bq.Define("c.baderror", func(ctx context.Context, a Args) error {
	return bq.Permanent(errors.New("nul \x00 and \xbf\xff here"))
}, bq.JobOptions[Args]{})

// gbkAttack is valid UTF-8 (so a valid key) whose bytes end in 0xbf 0x27:
// a GBK-family connection that escapes on the client turns that into
// 0xbf 0x5c 0x27, one character and a live quote.
const gbkAttack = "\u4fff' OR SLEEP(1) OR '"

// testUnsafeCharset (MySQL: its driver interpolates parameters on the
// client): a DSN naming a charset in which an escaping backslash can end
// a multibyte character (gbk, big5, sjis, cp932, gb18030) is refused with
// the fix; with interpolation turned off, an attack key goes through bq's
// statements as data, not SQL: stored byte for byte, and nothing sleeps.
func testUnsafeCharset(t *testing.T, h *harness) {
	if h.db != "mysql" {
		return
	}
	ctx := context.Background()
	sep := "?"
	if strings.Contains(h.dsn, "?") {
		sep = "&"
	}
	for _, cs := range []string{"gbk", "big5", "sjis", "cp932", "gb18030"} {
		_, err := bq.Open(ctx, h.dsn+sep+"charset="+cs, bq.Config{})
		wantErr(t, err, cs, "interpolateParams=false")
	}
	// The server takes a variable's name in any case; so does the check.
	for _, query := range []string{
		"character_set_client=gbk", "CHARACTER_SET_CLIENT=gbk", "Character_Set_Client=gbk", "character_set_CLIENT=sjis",
		"charset=GBK", "Collation=gbk_chinese_ci", "COLLATION=big5_chinese_ci", "CharSet=cp932",
		"character_set_client=utf8mb4&CHARACTER_SET_CLIENT=gbk",
	} {
		c, err := bq.Open(ctx, h.dsn+sep+query, bq.Config{})
		if err == nil {
			c.Close()
			t.Errorf("%s: accepted with parameter interpolation on", query)
			continue
		}
		if !strings.Contains(err.Error(), "interpolat") {
			t.Errorf("%s: %v; want the unsafe character set named with the fix", query, err)
		}
	}
	c, err := bq.Open(ctx, h.dsn+sep+"charset=gbk&interpolateParams=false", testConfig())
	if err != nil {
		t.Fatalf("gbk without client-side interpolation: %v", err)
	}
	defer c.Close()
	start := time.Now()
	res, err := limit1Job.Enqueue(ctx, c, Args{}, bq.WithConcurrencyKey(gbkAttack, 1))
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("the enqueue took %s: the key ran as SQL (SLEEP)?", took)
	}
	if k := jobInfo(t, h, res.ID).Key; k != "c.limit1/"+gbkAttack {
		t.Errorf("stored key %q, want %q", k, "c.limit1/"+gbkAttack)
	}
}

// testServerDefaultCharset (MySQL): the session's character set can come
// from the server, not the URL: a server that ignores the client's
// handshake (skip-character-set-client-handshake) gives a connection its
// own default, gbk here, unless the client sets one with SET NAMES, which
// a URL naming a collation but no charset does not. Checked on a MariaDB
// server of the test's own: bq reads each session's character set after
// connecting and refuses gbk with interpolation on; bq's default
// (charset=utf8mb4, set by SET NAMES) and interpolation off both keep an
// attack key as data.
func testServerDefaultCharset(t *testing.T, h *harness) {
	if h.db != "mysql" {
		return
	}
	ctx := context.Background()
	dsn := testdb.PrivateMariaDB(t, "--character-set-server=gbk", "--collation-server=gbk_chinese_ci",
		"--skip-character-set-client-handshake").DSN
	for _, query := range []string{"?collation=utf8mb4_general_ci", "?collation=utf8mb4_general_ci&interpolateParams=true"} {
		c, err := bq.Open(ctx, dsn+query, bq.Config{})
		if err == nil {
			// Before the session check: the connection was gbk and the
			// injection below went through.
			c.Close()
			t.Errorf("%s on a server whose default is gbk: accepted with parameter interpolation on", query)
			continue
		}
		wantErr(t, err, "character_set_client is gbk", "charset=utf8mb4", "interpolateParams=false")
	}
	for _, query := range []string{"", "?collation=utf8mb4_general_ci&interpolateParams=false", "?charset=gbk&interpolateParams=false"} {
		t.Run("URL "+query, func(t *testing.T) {
			c, err := bq.Open(ctx, dsn+query, testConfig())
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			defer c.Close()
			if err := c.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			res, err := limit1Job.Enqueue(ctx, c, Args{Test: h.test}, bq.WithConcurrencyKey(gbkAttack, 1))
			if err != nil {
				t.Fatal(err)
			}
			if took := time.Since(start); took > time.Second {
				t.Errorf("the enqueue took %s: the key ran as SQL (SLEEP)?", took)
			}
			if query == "" {
				// A gbk session compares a gbk literal with bq's utf8mb4
				// columns only in the statements that need it; the listing
				// by kind is the attack of the report, on bq's default.
				page, err := c.ListJobs(ctx, bq.JobFilter{Kinds: []string{"x\u4e3f') OR 1=1 #"}})
				if err != nil {
					t.Fatal(err)
				}
				if len(page.Jobs) != 0 {
					t.Errorf("listing an attack kind found %d jobs: the parameter ran as SQL", len(page.Jobs))
				}
			}
			info, err := c.Job(ctx, res.ID)
			if err != nil {
				t.Fatal(err)
			}
			if info.Key != "c.limit1/"+gbkAttack {
				t.Errorf("stored key %q, want %q", info.Key, "c.limit1/"+gbkAttack)
			}
		})
	}
}
