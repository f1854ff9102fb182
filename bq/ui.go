package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/bqueue/bq/ui"
)

// runUI serves the web dashboard until interrupted.
func runUI(ctx context.Context, e *env, args []string) error {
	return serveUI(ctx, e, args, nil)
}

// serveUI serves the dashboard until ctx ends; ready, when given, gets
// the listening address.
func serveUI(ctx context.Context, e *env, args []string, ready chan<- string) error {
	f := newFlagSet(e, "ui", "ui --dsn DSN [--prefix bq_] [--addr 127.0.0.1:8080] [--token T] [--secure-cookies]",
		`Serves the web dashboard: queues, blocked work by key, jobs, failed jobs
(with retry and discard) and processes.`)
	var db dbFlags
	db.register(f)
	addr := f.String("addr", "127.0.0.1:8080", "`address` to listen on; anything but a loopback address needs --token")
	var token string
	f.envString(&token, "token", "BQ_UI_TOKEN", "access `token` every request must carry")
	secureCookies := f.Bool("secure-cookies", false, "mark cookies Secure: set it behind a proxy that serves the dashboard over https")
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
	if err := checkExposure(*addr, token); err != nil {
		return f.fail("%v", err)
	}
	client, err := db.open(ctx, inspectConfig())
	if err != nil {
		return err
	}
	defer client.Close()

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("bq ui: listen on %s: %w", *addr, err)
	}
	opts := ui.Options{Token: token, SecureCookies: *secureCookies}
	if token == "" {
		// Loopback names are answered anyway; --addr may be another.
		opts.Hosts = []string{*addr}
	}
	srv := &http.Server{Handler: ui.Handler(client, opts), ReadHeaderTimeout: 10 * time.Second}
	link := "http://" + ln.Addr().String() + "/"
	fmt.Fprintf(e.stderr, "bq ui: serving the dashboard at %s (Ctrl-C to stop)\n", link)
	if token != "" {
		// The token is the user's own (flag or environment): printing
		// it would leave it in terminals and service logs.
		fmt.Fprintf(e.stderr, "bq ui: it needs the token of --token or $BQ_UI_TOKEN: open %s?token=<token> once, or send Authorization: Bearer <token>\n", link)
	}
	if ready != nil {
		ready <- ln.Addr().String()
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
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
	return fmt.Errorf("refusing to serve the dashboard on %s (%s) without --token: anyone who can reach it could retry and discard jobs; "+
		"pass --token (or set BQ_UI_TOKEN), or listen on 127.0.0.1", addr, shown)
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
