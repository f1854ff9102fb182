package humanize

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestRedactDSN: every shape of DSN a user may pass loses its secrets and
// keeps the rest; SQLite paths come back as they are.
func TestRedactDSN(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		// URLs with user:pass.
		{"postgres://app:hunter2@db:5432/app", "postgres://app:***@db:5432/app"},
		{"postgresql://app:hunter2@db/app?sslmode=disable", "postgresql://app:***@db/app?sslmode=disable"},
		{"mysql://root:hunter2@127.0.0.1:3306/test", "mysql://root:***@127.0.0.1:3306/test"},
		{"postgres://:hunter2@db/app", "postgres://:***@db/app"},
		// Passwords holding @, : and /, raw or percent-encoded.
		{"postgres://app:hun@ter:2@db:5432/app", "postgres://app:***@db:5432/app"},
		{"mysql://root:hu/nt?er2@db:3306/x", "mysql://root:***@db:3306/x"},
		{"mysql://root:hunter%40%3A2@db:3306/x", "mysql://root:***@db:3306/x"},
		// Secrets in the query string.
		{"postgres://app@db/app?password=hunter2&sslmode=disable", "postgres://app@db/app?password=***&sslmode=disable"},
		{"postgres://db/app?sslmode=verify-full&sslpassword=hunter2", "postgres://db/app?sslmode=verify-full&sslpassword=***"},
		{"mysql://root@db/x?pass=hunter2", "mysql://root@db/x?pass=***"},
		{"mysql://root:hunter1@db/x?Password=hunter2#frag", "mysql://root:***@db/x?Password=***#frag"},
		{"postgres://db/app?password=hun:ter@2", "postgres://db/app?password=***"},
		// Unknown schemes: redacted the same way.
		{"mongodb://u:hunter2@h/x", "mongodb://u:***@h/x"},
		// go-sql-driver's own form.
		{"root:hunter2@tcp(127.0.0.1:3306)/db", "root:***@tcp(127.0.0.1:3306)/db"},
		{"root:hun@ter2@tcp(127.0.0.1:3306)/db?parseTime=true", "root:***@tcp(127.0.0.1:3306)/db?parseTime=true"},
		{"root:hunter2@unix(/tmp/mysql.sock)/db", "root:***@unix(/tmp/mysql.sock)/db"},
		// libpq key=value.
		{"host=db user=app password=hunter2 dbname=app", "host=db user=app password=*** dbname=app"},
		{"host=db password = 'hun ter\\'2' dbname=app", "host=db password = *** dbname=app"},
		{"sslpassword=hunter2 host=db", "sslpassword=*** host=db"},
		// A DSN of its own in a parameter (bq's listen_dsn), raw or
		// percent-encoded: hidden whole when it holds a secret.
		{"postgres://app:hunter1@pgb:6432/app?listen_dsn=postgres%3A%2F%2Fl%3Ahunter2%40db%2Fapp&sslmode=disable",
			"postgres://app:***@pgb:6432/app?listen_dsn=***&sslmode=disable"},
		{"postgres://app:hunter1@pgb:6432/app?listen_dsn=postgres://l:hunter2@db/app", "postgres://app:***@pgb:6432/app?listen_dsn=***"},
		{"postgres://app@pgb/app?sslmode=disable&listen_dsn=postgres://l:hunter2@db/app", "postgres://app@pgb/app?sslmode=disable&listen_dsn=***"},
		{"postgres://app:hunter1@pgb/app?listen_dsn=postgres://db.internal:5432", "postgres://app:***@pgb/app?listen_dsn=postgres://db.internal:5432"},
		// Nothing to hide.
		{"postgres://app@db/app", "postgres://app@db/app"},
		{"postgres://db/app?application_name=a@b", "postgres://db/app?application_name=a@b"},
		{"host=db user=app", "host=db user=app"},
		// SQLite paths, whatever they hold.
		{"sqlite:///var/lib/app/jobs.db", "sqlite:///var/lib/app/jobs.db"},
		{"sqlite::memory:", "sqlite::memory:"},
		{"sqlite:///tmp/a:b@c.db?_pragma=busy_timeout(5000)", "sqlite:///tmp/a:b@c.db?_pragma=busy_timeout(5000)"},
		{"/var/lib/a:b@c.db", "/var/lib/a:b@c.db"},
	} {
		got := RedactDSN(c.in)
		if got != c.want {
			t.Errorf("RedactDSN(%q) = %q, want %q", c.in, got, c.want)
		}
		if strings.Contains(got, "hunter") || strings.Contains(got, "ter2") {
			t.Errorf("RedactDSN(%q) = %q keeps the secret", c.in, got)
		}
	}
}

func TestTerminal(t *testing.T) {
	for _, c := range []struct{ in, term, visible string }{
		{"acme", "acme", "acme"},
		{"a\x1b]0;X\x07b", `a\u001b]0;X\u0007b`, `a\u001b]0;X\u0007b`},
		{"a\tb\nc\r", `a\u0009b\u000ac\u000d`, "a\tb\nc\r"},
		{"x\u202ey\u2066z\u200e\u200f\u061c", `x\u202ey\u2066z\u200e\u200f\u061c`, `x\u202ey\u2066z\u200e\u200f\u061c`},
		{"c1\u0085\u009b del\x7f", `c1\u0085\u009b del\u007f`, `c1\u0085\u009b del\u007f`},
		{"bad\x9bbyte", `bad\x9bbyte`, `bad\x9bbyte`},
		{"ключ 🔑", "ключ 🔑", "ключ 🔑"},
		// Zero-width, separators, fillers, other spaces, tags, BOM, soft hyphen.
		{"a\u200bb\u2028c\u2029d", `a\u200bb\u2028c\u2029d`, `a\u200bb\u2028c\u2029d`},
		{"\u3164\u115f\u1160\uffa0", `\u3164\u115f\u1160\uffa0`, `\u3164\u115f\u1160\uffa0`},
		{"nb\u00a0sp\u3000\u2009\ufeff\u00ad\u2060", `nb\u00a0sp\u3000\u2009\ufeff\u00ad\u2060`, `nb\u00a0sp\u3000\u2009\ufeff\u00ad\u2060`},
		{"tag\U000e0041\U000e007f", `tag\U000e0041\U000e007f`, `tag\U000e0041\U000e007f`},
		// Text that spells an escape cannot pass for one.
		{`lit\u202e`, `lit\\u202e`, `lit\\u202e`},
		{`a\\b`, `a\\\b`, `a\\\b`},
		{"a\\\u200b", `a\\\u200b`, `a\\\u200b`},
		{`x\x9b \U000e0041`, `x\\x9b \\U000e0041`, `x\\x9b \\U000e0041`},
		{`C:\temp\n end\`, `C:\temp\n end\`, `C:\temp\n end\`},
	} {
		if got := Terminal(c.in); got != c.term {
			t.Errorf("Terminal(%q) = %q, want %q", c.in, got, c.term)
		}
		if got := Visible(c.in); got != c.visible {
			t.Errorf("Visible(%q) = %q, want %q", c.in, got, c.visible)
		}
	}
}

// TestDSNSecrets: what RedactDSN hides is what DSNSecrets returns, as
// written and percent-decoded, and Redact hides it in any text.
func TestDSNSecrets(t *testing.T) {
	for _, c := range []struct {
		dsn  string
		want []string
	}{
		{"postgres://app:hunter2@db:5432/app", []string{"hunter2"}},
		{"mysql://root:hunter%40%3A2@db:3306/x", []string{"hunter%40%3A2", "hunter@:2"}},
		{"postgres://app:pw1@db/app?sslpassword=pw2&sslmode=disable", []string{"pw1", "pw2"}},
		{"host=db password='hun ter' dbname=app", []string{"'hun ter'"}},
		{"root:hunter2@tcp(127.0.0.1:3306)/db", []string{"hunter2"}},
		{"postgres://app@db/app", nil},
		{"sqlite:///tmp/a:b@c.db", nil},
		{"postgres://app@pgb/app?listen_dsn=postgres%3A%2F%2Fl%3Ahunter2%40db", []string{"postgres%3A%2F%2Fl%3Ahunter2%40db", "postgres://l:hunter2@db", "hunter2"}},
	} {
		if got := DSNSecrets(c.dsn); !slices.Equal(got, c.want) {
			t.Errorf("DSNSecrets(%q) = %q, want %q", c.dsn, got, c.want)
		}
	}
	msg := `connect "mysql://root:hunter@:2@db" as root (password hunter@:2): token s3cr3t-t0ken; pw "ab"`
	got := Redact(msg, append(DSNSecrets("mysql://root:hunter%40%3A2@db/x"), "s3cr3t-t0ken", "ab")...)
	if want := `connect "mysql://root:***@db" as root (password ***): token ***; pw "ab"`; got != want {
		t.Errorf("Redact = %q, want %q", got, want)
	}
}

// unescape reads Terminal's output back: every string must come back
// whole, so no two strings print alike.
func unescape(t *testing.T, s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '\\':
			b.WriteByte('\\')
			i++
		case 'u', 'U', 'x':
			n := map[byte]int{'u': 4, 'U': 8, 'x': 2}[s[i+1]]
			v, err := strconv.ParseUint(s[i+2:i+2+n], 16, 32)
			if err != nil {
				t.Fatalf("bad escape in %q at %d", s, i)
			}
			if s[i+1] == 'x' {
				b.WriteByte(byte(v))
			} else {
				b.WriteRune(rune(v))
			}
			i += 1 + n
		default:
			b.WriteByte('\\')
		}
	}
	return b.String()
}

// TestTerminalIsUnambiguous: Terminal's output reads back to its input,
// for strings mixing escapes' own spellings with what they stand for.
func TestTerminalIsUnambiguous(t *testing.T) {
	parts := []string{`\`, `u`, `U`, `x`, `202e`, "\u202e", "\u200b", "\x1b", "\xff", "a", "\U000e0041", `\\`, "é", "\n"}
	for i := range 20000 {
		var in strings.Builder
		for j := 0; j < 1+i%7; j++ {
			in.WriteString(parts[(i*7+j*13+i/(j+1))%len(parts)])
		}
		for _, f := range []func(string) string{Terminal, Visible} {
			out := f(in.String())
			if back := unescape(t, out); back != in.String() {
				t.Fatalf("%q printed as %q reads back as %q", in.String(), out, back)
			}
			for _, r := range out {
				if r != '\t' && r != '\n' && r != '\r' && hidden(r, false) {
					t.Fatalf("%q printed as %q keeps %U", in.String(), out, r)
				}
			}
		}
	}
}

// TestVisibleJSON: a JSON document keeps its meaning: hidden characters
// become JSON escapes (surrogate pairs beyond U+FFFF), backslashes stay.
func TestVisibleJSON(t *testing.T) {
	in := map[string]string{"k": "a\u200b\U000e0041\u202e b\\u202e\t"}
	raw, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	out := VisibleJSON(string(raw))
	var back map[string]string
	if err := json.Unmarshal([]byte(out), &back); err != nil || back["k"] != in["k"] {
		t.Fatalf("VisibleJSON(%s) = %s, which reads back as %q (%v)", raw, out, back["k"], err)
	}
	if want := `{"k":"a\u200b\udb40\udc41\u202e b\\u202e\t"}`; out != want {
		t.Errorf("VisibleJSON(%s) = %s, want %s", raw, out, want)
	}
}
