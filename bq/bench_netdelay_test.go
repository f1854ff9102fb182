package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// echoServer echoes every connection back until its client's end, then
// reports the end on the returned channel.
func echoServer(t *testing.T) (addr string, ended <-chan error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	ends := make(chan error, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				_, err := io.Copy(c, c) // nil at EOF
				c.Close()
				ends <- err
			}()
		}
	}()
	return ln.Addr().String(), ends
}

// TestNetDelay checks --net-delay's proxy: a round trip through it takes
// at least twice the delay (a lower bound: no upper one is asserted), a
// large payload written in many pieces comes back whole and in order
// through both half-closes, and closing the client ends the server's
// connection.
func TestNetDelay(t *testing.T) {
	const delay = 20 * time.Millisecond
	// Each case has an echo server and a proxy of its own.
	proxy := func(t *testing.T) (*netDelay, <-chan error) {
		target, ended := echoServer(t)
		p, err := startNetDelay(target, delay, func(err error) { t.Error(err) })
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		return p, ended
	}

	t.Run("round trip", func(t *testing.T) {
		p, _ := proxy(t)
		c, err := net.Dial("tcp", p.addr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		buf := make([]byte, 4)
		for range 3 {
			t0 := time.Now()
			if _, err := c.Write([]byte("ping")); err != nil {
				t.Fatal(err)
			}
			if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "ping" {
				t.Fatalf("read %q, %v; want ping", buf, err)
			}
			if rt := time.Since(t0); rt < 2*delay {
				t.Errorf("round trip %s; want at least %s", rt, 2*delay)
			}
		}
	})

	t.Run("payload", func(t *testing.T) {
		p, ended := proxy(t)
		c, err := net.Dial("tcp", p.addr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		payload := make([]byte, 600<<10)
		for i := range payload {
			payload[i] = byte(i*7 + i/251)
		}
		written := make(chan error, 1)
		go func() {
			for rest := payload; len(rest) > 0; {
				n := min(len(rest), 1000+len(rest)%3000)
				if _, err := c.Write(rest[:n]); err != nil {
					written <- err
					return
				}
				rest = rest[n:]
			}
			written <- c.(*net.TCPConn).CloseWrite()
		}()
		got, err := io.ReadAll(c) // ends when the echo server's close comes through
		if err != nil {
			t.Fatal(err)
		}
		if err := <-written; err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, payload) {
			i := 0
			for i < min(len(got), len(payload)) && got[i] == payload[i] {
				i++
			}
			t.Fatalf("got %d bytes back, want %d; they differ from byte %d", len(got), len(payload), i)
		}
		if err := <-ended; err != nil {
			t.Errorf("the echo server's connection ended with %v; want EOF", err)
		}
	})

	t.Run("close", func(t *testing.T) {
		p, ended := proxy(t)
		c, err := net.Dial("tcp", p.addr())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
		c.Close()
		select {
		case err := <-ended:
			if err != nil {
				t.Errorf("the echo server's connection ended with %v; want EOF", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("closing the client did not end the server's connection")
		}
	})

	t.Run("Close", func(t *testing.T) {
		p, ended := proxy(t)
		c, err := net.Dial("tcp", p.addr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
		time.Sleep(3 * delay) // through to the server
		if err := p.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if err := <-ended; err != nil {
			t.Errorf("the echo server's connection ended with %v; want EOF", err)
		}
		if _, err := io.ReadAll(c); err != nil {
			t.Errorf("the client's connection after Close: %v; want EOF", err)
		}
		if _, err := net.DialTimeout("tcp", p.addr(), time.Second); err == nil {
			t.Error("the proxy still accepts connections after Close")
		}
	})
}

func TestNetDelayDSN(t *testing.T) {
	const proxy = "127.0.0.1:40000"
	for _, c := range []struct{ dsn, want, target, err string }{
		{"postgres://postgres@127.0.0.1:5432/test?sslmode=disable&search_path=bench_1",
			"postgres://postgres@127.0.0.1:40000/test?sslmode=disable&search_path=bench_1", "127.0.0.1:5432", ""},
		{"postgresql://u:p%40ss@db.internal/app", "postgresql://u:p%40ss@127.0.0.1:40000/app", "db.internal:5432", ""},
		{"postgres://[::1]:6543/app", "postgres://127.0.0.1:40000/app", "[::1]:6543", ""},
		{"mysql://root@127.0.0.1:3306/bench_1", "mysql://root@127.0.0.1:40000/bench_1", "127.0.0.1:3306", ""},
		{"mysql://root:secret@db/test?parseTime=true", "mysql://root:secret@127.0.0.1:40000/test?parseTime=true", "db:3306", ""},
		{"mysql://root@/test", "mysql://root@127.0.0.1:40000/test", "127.0.0.1:3306", ""},
		{"postgres:///test?host=/tmp", "", "", "must name one host"},
		{"postgres://a:5432,b:5432/test", "", "", "must name one host"},
		{"postgres://a/test?port=5433", "", "", "sets port"},
		{"postgres://pool:6432/app?listen_dsn=postgres://db:5432", "", "", "sets listen_dsn"},
	} {
		got, target, err := netDelayDSN(c.dsn, proxy)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("netDelayDSN(%s): %v; want an error with %q", c.dsn, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want || target != c.target {
			t.Errorf("netDelayDSN(%s) = %s, %s, %v; want %s, %s", c.dsn, got, target, err, c.want, c.target)
		}
	}
}

// TestBenchNetDelay runs a small drain through --net-delay on each server
// database, in this process and with --processes, and checks that the
// run reports its delay. Timings are not asserted beyond the delay's
// floor: each job's claim is at least one round trip.
func TestBenchNetDelay(t *testing.T) {
	for _, db := range testDatabases(t) {
		if db.name == "sqlite" {
			continue
		}
		t.Run(db.name, func(t *testing.T) {
			dsn := map[string]string{"postgres": postgresDSN(), "mysql": mysqlDSN()}[db.name]
			for _, extra := range [][]string{nil, {"--processes", "2", "--slots", "4"}} {
				args := append([]string{"bench", "--dsn", dsn, "--mode", "drain", "--jobs", "100", "--slots", "8",
					"--net-delay", "2ms", "--json", "--progress=false"}, extra...)
				code, stdout, stderr := bqCmd(t, context.Background(), args...)
				if code != 0 {
					t.Fatalf("%v: exit %d\n%s", extra, code, stderr)
				}
				var r benchResult
				if err := json.Unmarshal([]byte(stdout), &r); err != nil {
					t.Fatalf("%v: %v\n%s", extra, err, stdout)
				}
				if r.NetDelayMS != 2 || r.WorkPerS <= 0 || r.WorkS < 0.004 {
					t.Errorf("%v: %+v; want net_delay_ms 2 and a drain of at least a round trip (4 ms)", extra, r)
				}
			}
			code, stdout, stderr := bqCmd(t, context.Background(), "bench", "--dsn", dsn, "--jobs", "20", "--net-delay", "250us", "--progress=false")
			if code != 0 || !strings.Contains(stdout, "each packet delayed 250µs each way") {
				t.Errorf("text output: exit %d\n%s%s", code, stdout, stderr)
			}
		})
	}
}
