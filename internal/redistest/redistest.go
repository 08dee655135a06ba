// Package redistest starts a throwaway redis-server for tests.
package redistest

import (
	"bytes"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"testing"
	"time"
)

// Server is a redis-server process owned by one test. It listens on a free
// loopback port, keeps nothing on disk (--save "" --appendonly no) and is
// killed when the test ends.
type Server struct {
	t    testing.TB
	bin  string
	port int
	dir  string
	args []string
	// conf is a configuration file to start with (sentinels).
	conf string
	cmd  *exec.Cmd
}

// Start starts redis-server on a free loopback port and waits until it
// answers PING. A missing binary fails the test: CI installs it, and so
// must a developer.
func Start(t testing.TB) *Server {
	t.Helper()
	return StartWith(t)
}

// StartWith is Start with more redis-server arguments, such as
// "--maxmemory", "10mb", "--maxmemory-policy", "allkeys-lru"; Restart keeps
// them.
func StartWith(t testing.TB, args ...string) *Server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("redis-server not found in PATH: install it with `apt-get install -y redis-server` (CI does; the Redis tests need it)")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	return startOn(t, bin, port, args...)
}

// startOn starts redis-server on port with args, stopped when t ends.
func startOn(t testing.TB, bin string, port int, args ...string) *Server {
	t.Helper()
	s := &Server{t: t, bin: bin, port: port, dir: t.TempDir(), args: args}
	s.start()
	t.Cleanup(s.Stop)
	return s
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// URL is the server's redis:// URL.
func (s *Server) URL() string { return "redis://" + s.Addr() }

// Stop kills the server. Stopping a stopped server does nothing.
func (s *Server) Stop() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
		s.cmd = nil
	}
}

// Restart stops the server if it runs and starts it again on the same
// port, empty (there is no persistence).
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	s.start()
}

func (s *Server) start() {
	s.t.Helper()
	var args []string
	if s.conf != "" {
		// A sentinel reads (and rewrites) a file of its own.
		args = append(args, s.conf)
	}
	args = append(args, "--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", s.dir, "--loglevel", "warning")
	args = append(args, s.args...)
	s.cmd = exec.Command(s.bin, args...)
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("starting redis-server: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		c, err := net.DialTimeout("tcp", s.Addr(), 200*time.Millisecond)
		if err == nil {
			_ = c.SetDeadline(time.Now().Add(time.Second))
			fmt.Fprint(c, "PING\r\n")
			buf := make([]byte, 7)
			n, _ := c.Read(buf)
			c.Close()
			if bytes.HasPrefix(buf[:n], []byte("+PONG")) {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.t.Fatalf("redis-server did not answer on %s", s.Addr())
}
