package challenge

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/didresolver"
)

// redisServer is a redis-server process owned by one test.
type redisServer struct {
	t    testing.TB
	bin  string
	port int
	dir  string
	cmd  *exec.Cmd
}

// startRedis starts redis-server on a free loopback port. A missing binary
// fails the test: CI installs it, and so must a developer.
func startRedis(t testing.TB) *redisServer {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("redis-server not found in PATH: install it with `apt-get install -y redis-server` (CI does; the Redis store tests need it)")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	r := &redisServer{t: t, bin: bin, port: port, dir: t.TempDir()}
	r.start()
	t.Cleanup(r.stop)
	return r
}

func (r *redisServer) addr() string { return fmt.Sprintf("127.0.0.1:%d", r.port) }

func (r *redisServer) start() {
	r.t.Helper()
	r.cmd = exec.Command(r.bin, "--port", fmt.Sprint(r.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", r.dir, "--loglevel", "warning")
	if err := r.cmd.Start(); err != nil {
		r.t.Fatalf("starting redis-server: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		c, err := net.DialTimeout("tcp", r.addr(), 200*time.Millisecond)
		if err == nil {
			c.SetDeadline(time.Now().Add(time.Second))
			fmt.Fprint(c, "PING\r\n")
			buf := make([]byte, 7)
			n, _ := c.Read(buf)
			c.Close()
			if strings.HasPrefix(string(buf[:n]), "+PONG") {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	r.t.Fatalf("redis-server did not answer on %s", r.addr())
}

func (r *redisServer) stop() {
	if r.cmd != nil && r.cmd.Process != nil {
		_ = r.cmd.Process.Kill()
		_ = r.cmd.Wait()
		r.cmd = nil
	}
}

func newTestRedisStore(t testing.TB, addr string) *RedisStore {
	t.Helper()
	s, err := NewRedisStore(RedisOptions{Addr: addr, KeyPrefix: "test:" + t.Name() + ":"})
	if err != nil {
		t.Fatalf("NewRedisStore: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestRedisStore(t *testing.T) {
	ctx := context.Background()
	srv := startRedis(t)
	s := newTestRedisStore(t, srv.addr())
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	rec := Record{Challenge: "chal", AgentDID: testDID, IssuedAt: now, ExpiresAt: now.Add(time.Minute)}

	t.Run("put consume once", func(t *testing.T) {
		if err := s.Put(ctx, "n1", rec, time.Minute); err != nil {
			t.Fatalf("Put: %v", err)
		}
		if err := s.Put(ctx, "n1", rec, time.Minute); !errors.Is(err, ErrNonceExists) {
			t.Fatalf("second Put = %v, want ErrNonceExists", err)
		}
		got, err := s.Consume(ctx, "n1")
		if err != nil || got.Challenge != rec.Challenge || got.AgentDID != rec.AgentDID || !got.IssuedAt.Equal(rec.IssuedAt) || !got.ExpiresAt.Equal(rec.ExpiresAt) {
			t.Fatalf("Consume = %+v, %v", got, err)
		}
		if _, err := s.Consume(ctx, "n1"); !errors.Is(err, ErrNonceNotFound) {
			t.Fatalf("second Consume = %v, want ErrNonceNotFound", err)
		}
		if _, err := s.Consume(ctx, "never"); !errors.Is(err, ErrNonceNotFound) || Code(err) != -32003 {
			t.Fatalf("Consume unknown = %v", err)
		}
	})
	t.Run("ttl expiry", func(t *testing.T) {
		if err := s.Put(ctx, "short", rec, 150*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		time.Sleep(400 * time.Millisecond)
		if _, err := s.Consume(ctx, "short"); !errors.Is(err, ErrNonceNotFound) {
			t.Fatalf("Consume after TTL = %v, want ErrNonceNotFound", err)
		}
		if err := s.Put(ctx, "short", rec, 0); err == nil {
			t.Fatal("Put with zero ttl succeeded")
		}
	})
	t.Run("key prefix", func(t *testing.T) {
		other := newTestRedisStore(t, srv.addr()) // another prefix
		if err := s.Put(ctx, "shared-name", rec, time.Minute); err != nil {
			t.Fatal(err)
		}
		if _, err := other.Consume(ctx, "shared-name"); !errors.Is(err, ErrNonceNotFound) {
			t.Fatalf("store with another prefix saw the record: %v", err)
		}
	})
}

func TestRedisStoreTwoReplicas(t *testing.T) {
	ctx := context.Background()
	srv := startRedis(t)
	opts := RedisOptions{Addr: srv.addr(), KeyPrefix: "replicas:"}
	a, err := NewRedisStore(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := NewRedisStore(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	rec := testRecord(time.Now)

	if err := a.Put(ctx, "n", rec, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := b.Put(ctx, "n", rec, time.Minute); !errors.Is(err, ErrNonceExists) {
		t.Fatalf("Put at B of A's nonce = %v", err)
	}
	if _, err := b.Consume(ctx, "n"); err != nil {
		t.Fatalf("Consume at B: %v", err)
	}
	if _, err := a.Consume(ctx, "n"); !errors.Is(err, ErrNonceNotFound) {
		t.Fatalf("Consume at A after B = %v", err)
	}

	// Many concurrent consumers on both replicas: exactly one wins per nonce.
	const nonces = 10
	for i := range nonces {
		if err := a.Put(ctx, fmt.Sprint("c", i), rec, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	wins := map[string]int{}
	var wg sync.WaitGroup
	for w := range 8 {
		store := a
		if w%2 == 1 {
			store = b
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range nonces {
				n := fmt.Sprint("c", i)
				_, err := store.Consume(ctx, n)
				switch {
				case err == nil:
					mu.Lock()
					wins[n]++
					mu.Unlock()
				case !errors.Is(err, ErrNonceNotFound):
					t.Errorf("Consume: %v", err)
				}
			}
		}()
	}
	wg.Wait()
	if len(wins) != nonces {
		t.Fatalf("%d nonces consumed, want %d", len(wins), nonces)
	}
	for n, w := range wins {
		if w != 1 {
			t.Fatalf("nonce %s consumed %d times", n, w)
		}
	}
}

func TestRedisStoreOutageAndRecovery(t *testing.T) {
	ctx := context.Background()
	srv := startRedis(t)
	s := newTestRedisStore(t, srv.addr())
	rec := testRecord(time.Now)
	if err := s.Put(ctx, "before", rec, time.Minute); err != nil {
		t.Fatal(err)
	}

	srv.stop()
	start := time.Now()
	if err := s.Put(ctx, "during", rec, time.Minute); !errors.Is(err, ErrStoreUnavailable) || Code(err) != -32000 {
		t.Fatalf("Put with Redis down = %v, want ErrStoreUnavailable", err)
	}
	if _, err := s.Consume(ctx, "before"); !errors.Is(err, ErrStoreUnavailable) {
		t.Fatalf("Consume with Redis down = %v, want ErrStoreUnavailable", err)
	}
	if err := s.Ping(ctx); !errors.Is(err, ErrStoreUnavailable) {
		t.Fatalf("Ping with Redis down = %v", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("failing took %v; the store must fail fast", d)
	}

	srv.start() // same port, empty (no persistence)
	var err error
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if err = s.Put(ctx, "after", rec, time.Minute); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("store did not recover after Redis came back: %v", err)
	}
	if _, err := s.Consume(ctx, "after"); err != nil {
		t.Fatalf("Consume after recovery: %v", err)
	}
	if _, err := s.Consume(ctx, "before"); !errors.Is(err, ErrNonceNotFound) {
		t.Fatalf("record from before the restart = %v, want ErrNonceNotFound (no persistence)", err)
	}
}

func TestRedisStoreServiceAcrossReplicas(t *testing.T) {
	ctx := context.Background()
	srv := startRedis(t)
	fA, fB := newFixture(t), newFixture(t)
	mk := func(f *fixture) *Service {
		st := newTestRedisStore(t, srv.addr()) // same prefix: same test name
		svc, err := New(WithStore(st), WithClock(f.clock.Now), WithResolver(f.resolver), WithCredentialVerifier(f.verifier))
		if err != nil {
			t.Fatal(err)
		}
		return svc
	}
	svcA, svcB := mk(fA), mk(fB)
	a := newAgent(t, didresolver.Ed25519)
	hr, err := svcA.Issue(ctx, HandshakeParams{AgentDID: a.did})
	if err != nil {
		t.Fatalf("Issue at A: %v", err)
	}
	p := VerifyParams{SignedChallenge: answer(t, a, hr, TimestampRFC3339(fA.clock.Now())), Credential: fA.credential(t, a.did)}
	if _, err := svcB.Verify(ctx, p); err != nil {
		t.Fatalf("Verify at B: %v", err)
	}
	if _, err := svcA.Verify(ctx, p); !errors.Is(err, ErrReplay) {
		t.Fatalf("replay at A = %v, want ErrReplay", err)
	}
}

func TestRedisOptions(t *testing.T) {
	tests := []struct {
		name     string
		opts     RedisOptions
		ok       bool
		addr     string
		password string
		db       int
		tls      bool
	}{
		{name: "url", opts: RedisOptions{URL: "redis://:s3cret@redis.internal:6380/2"}, ok: true, addr: "redis.internal:6380", password: "s3cret", db: 2},
		{name: "rediss", opts: RedisOptions{URL: "rediss://user:pw@redis.internal:6390"}, ok: true, addr: "redis.internal:6390", password: "pw", tls: true},
		{name: "url default port", opts: RedisOptions{URL: "redis://localhost"}, ok: true, addr: "localhost:6379"},
		{name: "explicit fields win", opts: RedisOptions{URL: "redis://:a@h:1/1", Addr: "h2:2", Password: "b", DB: 3}, ok: true, addr: "h2:2", password: "b", db: 3},
		{name: "addr", opts: RedisOptions{Addr: "127.0.0.1:6379"}, ok: true, addr: "127.0.0.1:6379"},
		{name: "nothing", opts: RedisOptions{}},
		{name: "bad scheme", opts: RedisOptions{URL: "http://:s3cret@h:1"}},
		{name: "unix scheme", opts: RedisOptions{URL: "unix:///tmp/redis.sock"}},
		{name: "bad url", opts: RedisOptions{URL: "redis://:s3cret@h:1/%zz"}},
		{name: "bad db", opts: RedisOptions{URL: "redis://:s3cret@h:1/x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := NewRedisStore(tt.opts)
			if !tt.ok {
				if err == nil {
					s.Close()
					t.Fatal("NewRedisStore succeeded")
				}
				if strings.Contains(err.Error(), "s3cret") {
					t.Fatalf("error leaks the password: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("NewRedisStore: %v", err)
			}
			defer s.Close()
			o := s.client.Options()
			if o.Addr != tt.addr || o.Password != tt.password || o.DB != tt.db || (o.TLSConfig != nil) != tt.tls {
				t.Fatalf("options addr=%q password=%q db=%d tls=%v", o.Addr, o.Password, o.DB, o.TLSConfig != nil)
			}
			if o.ReadTimeout != DefaultRedisReadTimeout || o.DialTimeout != DefaultRedisDialTimeout || s.prefix != DefaultRedisKeyPrefix {
				t.Fatalf("defaults not applied: %+v prefix %q", o, s.prefix)
			}
		})
	}
}
