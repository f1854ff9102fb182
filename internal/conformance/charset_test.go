package conformance

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/bqueue/bq"
)

var _ = register(
	scenario{"UnsafeCharsetRefused", testUnsafeCharset},
	scenario{"AnyErrorTextIsRecorded", testAnyErrorText},
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
