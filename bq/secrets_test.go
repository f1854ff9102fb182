package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bqueue/bq"
)

// The secrets TestNoSecretPrinted hands bq; it greps for their stems.
const (
	secretStem = "S3cretPW"
	tokenStem  = "T0kenUI"
	uiToken    = tokenStem + "-9f3a-4d0e-b7c2"
)

// commandsOfHelp returns the commands `bq help` lists.
func commandsOfHelp(t *testing.T) []string {
	t.Helper()
	code, out, _ := bqCmd(t, context.Background(), "help")
	if code != 0 {
		t.Fatalf("bq help: exit %d", code)
	}
	_, list, _ := strings.Cut(out, "Commands:\n")
	list, _, _ = strings.Cut(strings.TrimLeft(list, "\n"), "\n\n")
	var names []string
	for _, m := range regexp.MustCompile(`(?m)^\t(\w+) `).FindAllStringSubmatch(list, -1) {
		names = append(names, m[1])
	}
	if len(names) < 5 {
		t.Fatalf("bq help lists %q: too few commands to be the list", names)
	}
	return names
}

// unreachable are DSNs of every shape holding a password, on servers
// that do not answer: their errors must not show it.
var unreachable = []string{
	"postgres://app:" + secretStem + "-1@127.0.0.1:1/app?sslmode=disable",
	"postgres://app@127.0.0.1:1/app?sslpassword=" + secretStem + "-2",
	"mysql://root:" + secretStem + "-3@127.0.0.1:1/test",
	"mysql://root:" + secretStem + "%40-4@127.0.0.1:1/test",
	"host=127.0.0.1 port=1 user=app password=" + secretStem + "-5",
	"root:" + secretStem + "-6@tcp(127.0.0.1:1)/test",
	"postgres://app:" + secretStem + "-7@127.0.0.1:notaport/app",
}

// secretCase is one command line and how long it may run (0: until it
// returns by itself).
type secretCase struct {
	args []string
	stop time.Duration
	ok   bool // must succeed: the test then knows the path ran
}

// TestNoSecretPrinted runs every command `bq help` lists with a
// password in $BQ_DSN (and in --dsn) and a token in $BQ_UI_TOKEN: asking
// for help, with bad flags, bad arguments, unreachable servers of every
// DSN shape, and runs that work (--json too, the dashboard's pages, the
// dispatcher's log) on each database. No output may show a secret.
func TestNoSecretPrinted(t *testing.T) {
	for _, db := range testDatabases(t) {
		t.Run(db.name, func(t *testing.T) {
			dsn := secretDSN(t, db)
			t.Setenv("BQ_DSN", dsn)
			t.Setenv("BQ_UI_TOKEN", uiToken)
			ctx := context.Background()
			if code, out, errOut := bqCmd(t, ctx, "migrate", "up"); code != 0 {
				t.Fatalf("migrate up: exit %d\n%s%s", code, out, errOut)
			}
			blocked, key := secretJobs(t, dsn)
			cases := secretCases(t, db.name, blocked)
			checked := map[string]bool{}
			for _, c := range cases {
				checked[c.args[0]] = true
				wantNoSecret(t, "bq "+strings.Join(c.args, " "), runSecretCase(t, c))
			}
			wantNoSecret(t, "bq ui --addr 127.0.0.1:0 and its pages", uiPages(t, blocked, key))
			for _, name := range commandsOfHelp(t) {
				if !checked[name] {
					t.Errorf("bq %s is listed by bq help but has no case here: add its command lines to secretCases", name)
				}
			}
		})
	}
}

// secretDSN returns a fresh database's DSN carrying a password that the
// server accepts: PostgreSQL's trust ignores it, on MySQL a user of the
// test's own has it. SQLite has no password: the token and the
// unreachable DSNs are its secrets.
func secretDSN(t *testing.T, db testDatabase) string {
	dsn := db.fresh(t)
	switch db.name {
	case "postgres":
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatal(err)
		}
		u.User = url.UserPassword(u.User.Username(), secretStem+"-pg")
		return u.String()
	case "mysql":
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatal(err)
		}
		admin := mysqlAdmin(t)
		user := "cli_" + randomHex(4)
		for _, stmt := range []string{
			"CREATE USER '" + user + "'@'%' IDENTIFIED BY '" + secretStem + "-my'",
			"GRANT ALL ON " + strings.TrimPrefix(u.Path, "/") + ".* TO '" + user + "'@'%'",
		} {
			if _, err := admin.Exec(stmt); err != nil {
				t.Fatalf("%s: %v", stmt, err)
			}
		}
		t.Cleanup(func() {
			if _, err := admin.Exec("DROP USER '" + user + "'@'%'"); err != nil {
				t.Logf("drop user %s: %v", user, err)
			}
		})
		u.User = url.UserPassword(user, secretStem+"-my")
		return u.String()
	}
	return dsn
}

// secretJobs enqueues three jobs on one key (limit 1): one ready, two
// blocked. It returns the last one's id and the key.
func secretJobs(t *testing.T, dsn string) (int64, string) {
	ctx := context.Background()
	c, err := bq.Open(ctx, dsn, bq.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var last bq.EnqueueResult
	for range 3 {
		if last, err = inspectJob.Enqueue(ctx, c, inspectArgs{Account: "a1"}); err != nil {
			t.Fatal(err)
		}
	}
	return last.ID, "cli_test.inspect/a1"
}

// secretCases are the command lines of every command: with $BQ_DSN, with
// each unreachable DSN, and with bad usage. bq ui's serving run is
// uiPages.
func secretCases(t *testing.T, dbName string, blocked int64) []secretCase {
	id := strconv.FormatInt(blocked, 10)
	cases := []secretCase{
		{args: []string{"migrate", "status"}, ok: true},
		{args: []string{"migrate", "up"}, ok: true},
		{args: []string{"migrate"}},
		{args: []string{"migrate", "sideways"}},
		{args: []string{"status"}, ok: true},
		{args: []string{"status", "--json"}, ok: true},
		{args: []string{"status", "extra"}},
		{args: []string{"status", "--top", "x"}},
		{args: []string{"explain", id}, ok: true},
		{args: []string{"explain", "--json", id}, ok: true},
		{args: []string{"explain"}},
		{args: []string{"explain", "999999999"}},
		{args: []string{"dispatcher", "--interval", "50ms", "--log-level", "debug"}, stop: 1500 * time.Millisecond, ok: true},
		{args: []string{"dispatcher", "--interval", "-1s"}},
		{args: []string{"ui", "--addr", "nowhere"}},
		{args: []string{"bench", "--mode", "drain", "--jobs", "20", "--slots", "4", "--progress=false", "--json"}, ok: dbName != "mysql"},
		{args: []string{"bench", "--mode", "sideways"}},
		{args: []string{"demo", "--dsn", "sqlite:////" + t.TempDir() + "/x.db"}},
	}
	if dbName == "sqlite" {
		cases = append(cases, secretCase{args: []string{"demo"}, ok: true})
	} else {
		cases = append(cases, secretCase{args: []string{"demo", "--dsn", os.Getenv("BQ_DSN")}, ok: true})
	}
	// Every command asks for help, meets a flag it does not know, and
	// meets each unreachable DSN, on the command line and in $BQ_DSN.
	positional := map[string][]string{"migrate": {"status"}, "explain": {"1"}}
	for _, name := range commandsOfHelp(t) {
		pos := positional[name]
		cases = append(cases,
			secretCase{args: []string{name, "-h"}, ok: true},
			secretCase{args: []string{name, "--bogus"}},
			secretCase{args: append([]string{name, "--dsn"}, pos...)})
		for _, dsn := range unreachable {
			cases = append(cases,
				secretCase{args: append([]string{name, "--dsn", dsn}, pos...)},
				secretCase{args: append([]string{name, "--dsn=" + dsn}, pos...)})
		}
	}
	return cases
}

func wantNoSecret(t *testing.T, what, out string) {
	t.Helper()
	if strings.Contains(out, secretStem) || strings.Contains(out, tokenStem) {
		t.Errorf("%s printed a secret:\n%s", what, out)
	}
}

// runSecretCase runs c and returns everything it printed.
func runSecretCase(t *testing.T, c secretCase) string {
	t.Helper()
	ctx := context.Background()
	var cancel context.CancelFunc = func() {}
	if c.stop > 0 {
		ctx, cancel = context.WithTimeout(ctx, c.stop)
	}
	defer cancel()
	var out, errOut syncBuffer
	code := run(ctx, c.args, &env{stdout: &out, stderr: &errOut})
	all := out.String() + errOut.String()
	if c.ok && code != 0 {
		t.Errorf("bq %s: exit %d, want 0\n%s", strings.Join(c.args, " "), code, all)
	}
	return all
}

// uiPages serves the dashboard through `bq ui` with the token from
// $BQ_UI_TOKEN and returns every page it answers, logged in and not.
func uiPages(t *testing.T, blocked int64, key string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut syncBuffer
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"ui", "--addr", "127.0.0.1:0"}, &env{stdout: &out, stderr: &errOut}) }()
	re := regexp.MustCompile(`serving the dashboard at (http://\S+/)`)
	var base string
	for deadline := time.Now().Add(10 * time.Second); base == ""; time.Sleep(10 * time.Millisecond) {
		if m := re.FindStringSubmatch(errOut.String()); m != nil {
			base = m[1]
		} else if time.Now().After(deadline) {
			t.Fatalf("bq ui did not start:\n%s", errOut.String())
		}
	}
	id := strconv.FormatInt(blocked, 10)
	var pages strings.Builder
	get := func(c *http.Client, path string, bearer bool) {
		req, _ := http.NewRequest(http.MethodGet, base+strings.TrimPrefix(path, "/"), nil)
		if bearer {
			req.Header.Set("Authorization", "Bearer "+uiToken)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Errorf("GET %s: %v", path, err)
			return
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		// The path is the test's own: only what the dashboard answered counts.
		fmt.Fprintf(&pages, "GET %s: %d %s\n%s\n", strings.ReplaceAll(path, uiToken, "<token>"), resp.StatusCode, resp.Header, body)
	}
	for _, path := range []string{"/", "/blocked", "/processes", "/failed", "/jobs/" + id, "/jobs/" + id + "/args",
		"/key?key=" + url.QueryEscape(key), "/jobs/?id=" + id, "/nowhere", "/jobs/999999999"} {
		get(http.DefaultClient, path, true)
		get(http.DefaultClient, path, false)
	}
	jar, _ := cookiejar.New(nil)
	get(&http.Client{Jar: jar}, "/?token="+url.QueryEscape(uiToken), false)
	get(&http.Client{Jar: jar}, "/processes", false)
	cancel()
	if code := <-done; code != 0 {
		t.Errorf("bq ui: exit %d\n%s", code, errOut.String())
	}
	return pages.String() + out.String() + errOut.String()
}

// TestRedactor: a secret split across writes, or on a line the command
// ends without a newline, is hidden; the secrets come from $BQ_DSN,
// $BQ_UI_TOKEN and the command line's --dsn and --token in every form.
func TestRedactor(t *testing.T) {
	t.Setenv("BQ_DSN", "postgres://app:"+secretStem+"-env@db/app")
	t.Setenv("BQ_UI_TOKEN", uiToken)
	secrets := secretsOf([]string{"ui", "--dsn", "mysql://r:" + secretStem + "-a@h/x", "-token=" + tokenStem + "-b", "--dsn=host=h password=" + secretStem + "-c"})
	var buf syncBuffer
	r := &redactor{w: &buf, secrets: secrets}
	for _, chunk := range []string{"a " + secretStem[:3], secretStem[3:] + "-env b\nprogress " + tokenStem, "-b\r", uiToken + " " + secretStem + "-a " + secretStem + "-c"} {
		if _, err := io.WriteString(r, chunk); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Flush(); err != nil {
		t.Fatal(err)
	}
	if got, want := buf.String(), "a *** b\nprogress ***\r*** *** ***"; got != want {
		t.Errorf("redactor wrote %q, want %q", got, want)
	}
}
