package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/bqueue/bq/ui"
)

// runUI serves the web dashboard until interrupted.
func runUI(ctx context.Context, e *env, args []string) error {
	return serveUI(ctx, e, args, nil)
}

// uiServer bounds what a connection may cost the dashboard: a client
// that sends its headers or body slowly, reads slowly, or keeps an idle
// connection open is cut off, and at most maxConns connections are
// served at once (more wait to be accepted). Tests shorten them.
var uiServer = struct {
	readHeader, read, write, idle time.Duration
	maxConns                      int
}{readHeader: 5 * time.Second, read: 30 * time.Second, write: 60 * time.Second, idle: 30 * time.Second, maxConns: 64}

// serveUI serves the dashboard until ctx ends; ready, when given, gets
// the listening address.
func serveUI(ctx context.Context, e *env, args []string, ready chan<- string) error {
	f := newFlagSet(e, "ui", "ui --dsn DSN [--prefix bq_] [--addr 127.0.0.1:8080] [--token-file FILE] [--secure-cookies]\n\t[--search-metadata KEY]...",
		`Serves the web dashboard: the overview, the history's charts, queues
(pause and resume), blocked work by key (a key's limit override), rate
keys (their override), jobs, failed jobs (with retry and discard),
processes, periodic schedules, Verify (drift between the semaphores
and their keys' rows, with a Repair button), and a search box (a job id,
a key, a tag, or a metadata value under the --search-metadata keys).
Beyond loopback it needs a token: put it in a file (--token-file) or
$BQ_UI_TOKEN, not on the command line, where ps shows it; at least 16
random characters (openssl rand -hex 16).`)
	var db dbFlags
	db.register(f)
	addr := f.String("addr", "127.0.0.1:8080", "`address` to listen on; anything but a loopback address needs a token")
	var token string
	f.envString(&token, "token", "BQ_UI_TOKEN", "access `token` every request must carry (prefer --token-file: the command line shows in ps)")
	tokenFile := f.String("token-file", "", "read the access token from `file` (its first line)")
	secureCookies := f.Bool("secure-cookies", false, "mark cookies Secure: set it behind a proxy that serves the dashboard over https")
	var searchMeta listFlag
	f.Var(&searchMeta, "search-metadata", fmt.Sprintf("metadata `key` under which the search box also looks a word up (searching acme lists the jobs with tenant=acme); "+
		"repeat or comma-separate, at most %d; default tenant, --search-metadata= for none", ui.MaxSearchMetadata))
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	if err := f.noArgs(pos); err != nil {
		return err
	}
	if err := db.validate(f); err != nil {
		return err
	}
	onArgv, metaGiven := false, false
	f.Visit(func(fl *flag.Flag) {
		onArgv = onArgv || fl.Name == "token"
		metaGiven = metaGiven || fl.Name == "search-metadata"
	})
	searchKeys, err := searchMetadataKeys(searchMeta, metaGiven)
	if err != nil {
		return f.fail("%v", err)
	}
	if *tokenFile != "" {
		if onArgv || token != "" {
			return f.fail("give the token one way: --token-file, --token or $BQ_UI_TOKEN")
		}
		if token, err = readTokenFile(*tokenFile); err != nil {
			return f.fail("%v", err)
		}
	}
	if token != "" && len(token) < ui.MinTokenLength {
		return f.fail("the token is %d characters long: use at least %d random ones (openssl rand -hex 16), or none on a loopback address",
			len(token), ui.MinTokenLength)
	}
	if onArgv {
		fmt.Fprintln(e.stderr, "bq ui: warning: --token on the command line shows in ps to every user of this machine; use --token-file or $BQ_UI_TOKEN")
	}
	if err := checkExposure(*addr, token); err != nil {
		return f.fail("%v", err)
	}
	client, err := db.open(ctx, inspectConfig(e.stderr))
	if err != nil {
		return err
	}
	defer client.Close()

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("bq ui: listen on %s: %w", *addr, err)
	}
	opts := ui.Options{Token: token, SecureCookies: *secureCookies, SearchMetadata: searchKeys}
	if token == "" {
		// Loopback names are answered anyway; --addr may be another.
		opts.Hosts = []string{*addr}
	}
	srv := &http.Server{Handler: ui.Handler(client, opts),
		ReadHeaderTimeout: uiServer.readHeader, ReadTimeout: uiServer.read,
		WriteTimeout: uiServer.write, IdleTimeout: uiServer.idle, MaxHeaderBytes: 64 << 10}
	link := "http://" + ln.Addr().String() + "/"
	fmt.Fprintf(e.stderr, "bq ui: serving the dashboard at %s (Ctrl-C to stop)\n", link)
	if token != "" {
		// The token is the user's own (file, flag or environment):
		// printing it would leave it in terminals and service logs.
		fmt.Fprintf(e.stderr, "bq ui: it needs the token: open %s?token=<token> once, or send Authorization: Bearer <token>\n", link)
	}
	if ready != nil {
		ready <- ln.Addr().String()
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(limitConns(ln, uiServer.maxConns)) }()
	select {
	case err := <-errc:
		return fmt.Errorf("bq ui: %w", err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("bq ui: shut down: %w", err)
	}
	return nil
}

// searchMetadataKeys is ui.Options.SearchMetadata of --search-metadata:
// nil when not given (the dashboard's default, tenant), none when given
// empty, and refused past ui.MaxSearchMetadata distinct keys (the
// dashboard would search the first ones only).
func searchMetadataKeys(keys []string, given bool) ([]string, error) {
	if !given {
		return nil, nil
	}
	out := []string{}
	for _, k := range keys {
		if !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	if len(out) > ui.MaxSearchMetadata {
		return nil, fmt.Errorf("--search-metadata names %d keys (%s): the search looks a word up under at most %d, one query each",
			len(out), strings.Join(out, ", "), ui.MaxSearchMetadata)
	}
	return out, nil
}

// readTokenFile reads a token from the first line of a file, refusing a
// file other users of the machine can read.
func readTokenFile(path string) (string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("--token-file: %w", err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("--token-file %s can be read by other users (mode %v): chmod 600 it", path, st.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("--token-file: %w", err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	line = strings.TrimSpace(line)
	if line == "" {
		return "", fmt.Errorf("--token-file %s is empty: write the token on its first line", path)
	}
	return line, nil
}

// limitConns serves at most n connections of ln at once: Accept waits
// while n are open.
func limitConns(ln net.Listener, n int) net.Listener {
	return &connLimit{Listener: ln, slots: make(chan struct{}, n)}
}

type connLimit struct {
	net.Listener
	slots chan struct{}
}

func (l *connLimit) Accept() (net.Conn, error) {
	l.slots <- struct{}{}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &limitedConn{Conn: c, release: func() { <-l.slots }}, nil
}

type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// checkExposure refuses to serve the dashboard, whose forms retry and
// discard jobs, beyond this machine without a token.
func checkExposure(addr, token string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--addr %q: %w (use host:port, e.g. 127.0.0.1:8080)", addr, err)
	}
	if token != "" || isLoopback(host) {
		return nil
	}
	shown := host
	if shown == "" {
		shown = "every interface"
	}
	return fmt.Errorf("refusing to serve the dashboard on %s (%s) without a token: anyone who can reach it could retry and discard jobs; "+
		"give it a token (--token-file, or $BQ_UI_TOKEN), or listen on 127.0.0.1", addr, shown)
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
