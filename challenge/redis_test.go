package challenge

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/didresolver"
	"github.com/mcpi-edge/caddy-mcpi/internal/redistest"
	"github.com/redis/go-redis/v9"
)

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
	srv := redistest.Start(t)
	s := newTestRedisStore(t, srv.Addr())
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
	t.Run("peek", func(t *testing.T) {
		if _, err := s.Peek(ctx, "p1"); !errors.Is(err, ErrNonceNotFound) {
			t.Fatalf("Peek unknown = %v", err)
		}
		if err := s.Put(ctx, "p1", rec, time.Minute); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			got, err := s.Peek(ctx, "p1")
			if err != nil || got.Challenge != rec.Challenge || got.AgentDID != rec.AgentDID || !got.IssuedAt.Equal(rec.IssuedAt) || !got.ExpiresAt.Equal(rec.ExpiresAt) {
				t.Fatalf("Peek = %+v, %v", got, err)
			}
		}
		if _, err := s.Consume(ctx, "p1"); err != nil {
			t.Fatalf("Consume after Peek: %v", err)
		}
		if _, err := s.Peek(ctx, "p1"); !errors.Is(err, ErrNonceNotFound) {
			t.Fatalf("Peek after Consume = %v", err)
		}
		// A value that is not a record (another writer under the prefix)
		// is no record.
		if err := s.client.Set(ctx, s.prefix+"foreign", "not json", time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Peek(ctx, "foreign"); !errors.Is(err, ErrNonceNotFound) {
			t.Fatalf("Peek of a foreign value = %v", err)
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
		other := newTestRedisStore(t, srv.Addr()) // another prefix
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
	srv := redistest.Start(t)
	opts := RedisOptions{Addr: srv.Addr(), KeyPrefix: "replicas:"}
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
	srv := redistest.Start(t)
	s := newTestRedisStore(t, srv.Addr())
	rec := testRecord(time.Now)
	if err := s.Put(ctx, "before", rec, time.Minute); err != nil {
		t.Fatal(err)
	}

	srv.Stop()
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

	srv.Restart() // same port, empty (no persistence)
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
	srv := redistest.Start(t)
	fA, fB := newFixture(t), newFixture(t)
	mk := func(f *fixture) *Service {
		st := newTestRedisStore(t, srv.Addr()) // same prefix: same test name
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
			o := s.client.(*redis.Client).Options()
			if o.Addr != tt.addr || o.Password != tt.password || o.DB != tt.db || (o.TLSConfig != nil) != tt.tls {
				t.Fatalf("options addr=%q password=%q db=%d tls=%v", o.Addr, o.Password, o.DB, o.TLSConfig != nil)
			}
			if o.ReadTimeout != DefaultRedisReadTimeout+DefaultRedisWaitTimeout || o.DialTimeout != DefaultRedisDialTimeout || s.prefix != DefaultRedisKeyPrefix {
				t.Fatalf("defaults not applied: %+v prefix %q", o, s.prefix)
			}
		})
	}
}

// TestRedisStorePXFollowsTTL: the boxed PX argument is reused only while
// the TTL stays the same; every SET expires after the TTL it was given,
// whatever TTL the call before it used (markers and records, alternating
// and concurrently).
func TestRedisStorePXFollowsTTL(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	s := newTestRedisStore(t, srv.Addr())
	ttls := []time.Duration{time.Minute, time.Minute, time.Hour, time.Minute, 90 * time.Second, 90 * time.Second, time.Hour}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i, ttl := range ttls {
				var d [32]byte
				copy(d[:], fmt.Sprintf("g%d-i%d", g, i))
				if err := s.UseOnce(ctx, d, ttl); err != nil {
					t.Errorf("UseOnce: %v", err)
					return
				}
				key := s.prefix + redisSingleUsePrefix + fmt.Sprintf("%x", d[:])
				checkPTTL(t, s, key, ttl)

				nonce := fmt.Sprintf("rec-g%d-i%d", g, i)
				recTTL := ttls[len(ttls)-1-i] // another TTL than the marker's
				if err := s.Put(ctx, nonce, Record{Challenge: "c", AgentDID: testDID}, recTTL); err != nil {
					t.Errorf("Put: %v", err)
					return
				}
				checkPTTL(t, s, s.prefix+nonce, recTTL)
			}
		}()
	}
	wg.Wait()
}

// checkPTTL fails t unless key expires within ttl and not more than 5 s
// sooner.
func checkPTTL(t *testing.T, s *RedisStore, key string, ttl time.Duration) {
	t.Helper()
	got, err := s.client.PTTL(context.Background(), key).Result()
	if err != nil {
		t.Errorf("PTTL %s: %v", key, err)
		return
	}
	if got > ttl || got < ttl-5*time.Second {
		t.Errorf("%s expires in %v, want %v", key, got, ttl)
	}
}
