package main

import (
	"bytes"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/bqueue/bq/internal/humanize"
)

// secretsOf lists what bq must never print: the secrets of the DSNs and
// the dashboard tokens that the command line and the environment hold.
// Usage texts, errors and logs are written to hide them by construction;
// redactor is the net under them, for text bq does not write itself (a
// driver's error, say).
func secretsOf(args []string) []string {
	secrets := append(humanize.DSNSecrets(os.Getenv("BQ_DSN")), os.Getenv("BQ_UI_TOKEN"))
	for i, a := range args {
		if !strings.HasPrefix(a, "-") {
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !hasValue && i+1 < len(args) {
			value = args[i+1]
		}
		switch name {
		case "dsn":
			secrets = append(secrets, humanize.DSNSecrets(value)...)
		case "token":
			secrets = append(secrets, value)
		case "token-file":
			if t, err := readTokenFile(value); err == nil {
				secrets = append(secrets, t)
			}
		}
	}
	kept := secrets[:0]
	for _, s := range secrets {
		if len(s) >= humanize.MinSecret {
			kept = append(kept, s)
		}
	}
	return kept
}

// redactor writes to w what is written to it with the secrets hidden
// (humanize.Redact). It writes whole lines, so that a secret split across
// two writes is hidden too; Flush writes the rest. Safe for concurrent
// use: loggers and the command write to it at once.
type redactor struct {
	mu      sync.Mutex
	w       io.Writer
	secrets []string
	buf     []byte
}

func (r *redactor) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.buf = append(r.buf, p...)
	// A carriage return ends a line too: progress bars redraw with it.
	i := bytes.LastIndexAny(r.buf, "\n\r")
	if i < 0 {
		return len(p), nil
	}
	line := string(r.buf[:i+1])
	r.buf = append(r.buf[:0], r.buf[i+1:]...)
	if _, err := io.WriteString(r.w, humanize.Redact(line, r.secrets...)); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Flush writes what is left after the last line.
func (r *redactor) Flush() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	rest := string(r.buf)
	r.buf = r.buf[:0]
	_, err := io.WriteString(r.w, humanize.Redact(rest, r.secrets...))
	return err
}

// redacting returns e writing through redactors that hide secrets, and
// the function that flushes them; e itself when there is nothing to hide.
func (e *env) redacting(secrets []string) (*env, func()) {
	if len(secrets) == 0 {
		return e, func() {}
	}
	out := &redactor{w: e.stdout, secrets: secrets}
	errOut := &redactor{w: e.stderr, secrets: secrets}
	return &env{stdout: out, stderr: errOut, prog: e.prog}, func() { _ = out.Flush(); _ = errOut.Flush() }
}

// underlying is the writer r writes to: a terminal, maybe (isTerminal).
func (r *redactor) underlying() io.Writer { return r.w }
