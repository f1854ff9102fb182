package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bqueue/bq"
)

// startUI runs bq ui with args until the test ends and returns its
// address and what it wrote to stderr.
func startUI(t *testing.T, args ...string) (string, *syncBuffer) {
	t.Helper()
	var stderr syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	ready, done := make(chan string, 1), make(chan error, 1)
	go func() { done <- serveUI(ctx, &env{stdout: io.Discard, stderr: &stderr}, args, ready) }()
	select {
	case addr := <-ready:
		t.Cleanup(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("bq ui: %v", err)
			}
		})
		return addr, &stderr
	case err := <-done:
		cancel()
		t.Fatalf("bq ui: %v\n%s", err, stderr.String())
	}
	return "", nil
}

// closedWithin reports whether the server closes c (a read sees EOF or a
// reset) within d.
func closedWithin(c net.Conn, d time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, c)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return false
	}
	return true
}

// TestUIConnectionTimeouts: bq ui cuts off a connection that stays idle
// after its answer, one whose headers never end, and one whose token was
// wrong (answered 401, the connection closed at once).
func TestUIConnectionTimeouts(t *testing.T) {
	saved := uiServer
	t.Cleanup(func() { uiServer = saved })
	uiServer.idle, uiServer.readHeader = 500*time.Millisecond, 500*time.Millisecond
	dsn, _ := inspectDB(t)
	addr, _ := startUI(t, "--dsn", dsn, "--addr", "127.0.0.1:0")

	idle, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	io.WriteString(idle, "GET /processes HTTP/1.1\r\nHost: "+addr+"\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(idle), nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Close {
		t.Fatalf("GET /processes: %d (close %v), want 200 on a kept-alive connection", resp.StatusCode, resp.Close)
	}
	if !closedWithin(idle, 10*time.Second) {
		t.Errorf("an idle kept-alive connection was still open 10 s after its answer (IdleTimeout %s)", uiServer.idle)
	}

	slow, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	io.WriteString(slow, "GET /processes HTTP/1.1\r\nHost: ")
	if !closedWithin(slow, 10*time.Second) {
		t.Errorf("a connection whose headers never end was still open after 10 s (ReadHeaderTimeout %s)", uiServer.readHeader)
	}

	token := "a-token-of-24-characters"
	t.Setenv("BQ_UI_TOKEN", token)
	tokAddr, _ := startUI(t, "--dsn", dsn, "--addr", "127.0.0.1:0")
	for i := range 3 {
		c, err := net.Dial("tcp", tokAddr)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: "+tokAddr+"\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || !closedWithin(c, 2*time.Second) {
			t.Errorf("request %d without the token: %d; want 401 and the connection closed", i, resp.StatusCode)
		}
		c.Close()
	}
}

// TestLimitConns: the listener serves at most n connections at once; the
// next is accepted when one closes.
func TestLimitConns(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := limitConns(inner, 2)
	defer ln.Close()
	accepted := make(chan net.Conn, 3)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	for range 3 {
		c, err := net.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	first, second := <-accepted, <-accepted
	select {
	case <-accepted:
		t.Fatal("a third connection was accepted while two were open")
	case <-time.After(300 * time.Millisecond):
	}
	first.Close()
	select {
	case c := <-accepted:
		c.Close()
	case <-time.After(10 * time.Second):
		t.Fatal("the third connection was not accepted after one closed")
	}
	second.Close()
}

// TestUITokenSources: a token comes from --token-file (readable by its
// owner only), $BQ_UI_TOKEN or --token (which warns: ps shows it); one
// shorter than 16 characters, or given two ways, is refused.
func TestUITokenSources(t *testing.T) {
	dsn, _ := inspectDB(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "token")
	const token = "a-token-of-24-characters"
	if err := os.WriteFile(file, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr, stderr := startUI(t, "--dsn", dsn, "--addr", "127.0.0.1:0", "--token-file", file)
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/processes", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("the token of --token-file: %v %v, want 200", resp.Status, err)
	}
	if strings.Contains(stderr.String(), token) || strings.Contains(stderr.String(), "warning") {
		t.Errorf("bq ui with --token-file wrote:\n%s", stderr.String())
	}

	_, stderr = startUI(t, "--dsn", dsn, "--addr", "127.0.0.1:0", "--token", token)
	if !strings.Contains(stderr.String(), "ps") || strings.Contains(stderr.String(), token) {
		t.Errorf("--token on the command line: bq ui wrote\n%s\nwant a warning naming ps, without the token", stderr.String())
	}

	open := filepath.Join(dir, "open")
	if err := os.WriteFile(open, []byte(token), 0o644); err != nil {
		t.Fatal(err)
	}
	short := filepath.Join(dir, "short")
	if err := os.WriteFile(short, []byte("hunter2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--token-file", open}, "chmod 600"},
		{[]string{"--token-file", short}, "at least 16"},
		{[]string{"--token", "hunter2"}, "at least 16"},
		{[]string{"--token-file", file, "--token", token}, "one way"},
		{[]string{"--token-file", filepath.Join(dir, "missing")}, "no such file"},
	} {
		var errOut syncBuffer
		err := serveUI(context.Background(), &env{stdout: io.Discard, stderr: &errOut}, append([]string{"--dsn", dsn, "--addr", "127.0.0.1:0"}, c.args...), nil)
		if err == nil || !strings.Contains(errOut.String(), c.want) {
			t.Errorf("%v: %v\n%s\nwant it refused, naming %q", c.args, err, errOut.String(), c.want)
		}
		if strings.Contains(errOut.String(), "hunter2") {
			t.Errorf("%v: the refusal prints the token", c.args)
		}
	}
}

// TestUISearchMetadataFlag: --search-metadata names the metadata keys the
// search box looks a word up under (ui.Options.SearchMetadata): given
// customer, searching globex lists the job with customer=globex and no
// longer the one with tenant=globex; given empty, none; unset, tenant;
// more than ui.MaxSearchMetadata keys are refused. On every database.
func TestUISearchMetadataFlag(t *testing.T) {
	for _, db := range testDatabases(t) {
		t.Run(db.name, func(t *testing.T) {
			ctx := context.Background()
			dsn, c := migratedClient(t, ctx, db)
			enqueue := func(md map[string]string) string {
				t.Helper()
				res, err := inspectJob.Enqueue(ctx, c, inspectArgs{Account: "a-" + randomHex(4)}, bq.WithMetadata(md))
				if err != nil {
					t.Fatal(err)
				}
				return fmt.Sprintf(`<tr data-job="%d">`, res.ID)
			}
			tenant := enqueue(map[string]string{"tenant": "globex"})
			customer := enqueue(map[string]string{"customer": "globex"})
			search := func(args ...string) string {
				t.Helper()
				addr, _ := startUI(t, append([]string{"--dsn", dsn, "--addr", "127.0.0.1:0"}, args...)...)
				resp, err := http.Get("http://" + addr + "/search?q=globex")
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				body, err := io.ReadAll(resp.Body)
				if err != nil || resp.StatusCode != http.StatusOK {
					t.Fatalf("search %v: %s %v", args, resp.Status, err)
				}
				return string(body)
			}
			for _, c := range []struct {
				args                 []string
				tenantOK, customerOK bool
			}{
				{nil, true, false},
				{[]string{"--search-metadata", "customer"}, false, true},
				{[]string{"--search-metadata", "tenant,customer"}, true, true},
				{[]string{"--search-metadata", "tenant", "--search-metadata", "customer"}, true, true},
				{[]string{"--search-metadata="}, false, false},
			} {
				body := search(c.args...)
				if strings.Contains(body, tenant) != c.tenantOK || strings.Contains(body, customer) != c.customerOK {
					t.Errorf("bq ui %v, search globex: lists the tenant's job %v, the customer's %v; want %v, %v",
						c.args, strings.Contains(body, tenant), strings.Contains(body, customer), c.tenantOK, c.customerOK)
				}
			}
		})
	}

	dsn, _ := inspectDB(t)
	var errOut syncBuffer
	err := serveUI(context.Background(), &env{stdout: io.Discard, stderr: &errOut},
		[]string{"--dsn", dsn, "--addr", "127.0.0.1:0", "--search-metadata", "a,b,c,d,e"}, nil)
	if err == nil || !strings.Contains(errOut.String(), "at most 4") || strings.Count(strings.TrimSpace(errOut.String()), "\n") > 1 {
		t.Errorf("five --search-metadata keys: %v\n%s\nwant a usage error of one line and a hint, naming at most 4", err, errOut.String())
	}
	var help bytes.Buffer
	if err := serveUI(context.Background(), &env{stdout: &help, stderr: &help}, []string{"-h"}, nil); !errors.Is(err, errHelp) {
		t.Fatal(err)
	}
	text := strings.Join(strings.Fields(help.String()), " ")
	for _, page := range []string{"--search-metadata", "history", "rate keys", "periodic schedules", "Verify", "search box"} {
		if !strings.Contains(text, page) {
			t.Errorf("bq ui -h does not name %q:\n%s", page, help.String())
		}
	}
}
