package ratelimit

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcpi-edge/caddy-mcpi/internal/redistest"
)

func newRedisClient(t *testing.T, addr string) redis.UniversalClient {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { c.Close() })
	return c
}

// Two replicas, each with its own client of one Redis, count as one: under
// concurrent calls from both, exactly the burst is allowed.
func TestRedisSharedAcrossReplicas(t *testing.T) {
	srv := redistest.Start(t)
	lim := Limit{Key: []string{KeyAgent, KeyTool}, Rate: 20, Per: time.Hour}
	replicas := []*Limiter{
		newLimiter(t, NewRedis(newRedisClient(t, srv.Addr())), false, lim),
		newLimiter(t, NewRedis(newRedisClient(t, srv.Addr())), false, lim),
	}
	var allowed atomic.Int64
	var wg sync.WaitGroup
	for i := range 60 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v := replicas[i%2].Check(context.Background(), alice, []Call{tool("search")})
			if v.Err != nil {
				t.Error(v.Err)
			}
			if !v.Limited {
				allowed.Add(1)
			}
		}()
	}
	wg.Wait()
	if n := allowed.Load(); n != 20 {
		t.Fatalf("allowed %d of 60 across two replicas, want exactly the burst of 20", n)
	}
	v := replicas[0].Check(context.Background(), alice, []Call{tool("search")})
	if !v.Limited || v.RetryAfter <= 2*time.Minute || v.RetryAfter > 3*time.Minute {
		t.Fatalf("after the burst: %+v, want limited, retry after about 3m", v)
	}
	// Another tool has a counter of its own.
	if v := replicas[1].Check(context.Background(), alice, []Call{tool("fetch")}); v.Limited {
		t.Fatal("tool fetch shares search's counter")
	}
}

func TestRedisGCRA(t *testing.T) {
	srv := redistest.Start(t)
	client := newRedisClient(t, srv.Addr())
	s := NewRedis(client)
	ctx := context.Background()
	q := Quota{Interval: time.Minute, Burst: 3}
	if res, err := s.Take(ctx, "k", q, 2); err != nil || !res.Allowed || res.Remaining != 1 {
		t.Fatalf("2 of 3: %+v %v", res, err)
	}
	res, err := s.Take(ctx, "k", q, 2)
	if err != nil || res.Allowed || res.RetryAfter <= 59*time.Second || res.RetryAfter > time.Minute {
		t.Fatalf("2 more with 1 left: %+v %v, want refused, retry after about 1m", res, err)
	}
	if res, _ := s.Take(ctx, "k", q, -2); !res.Allowed {
		t.Fatalf("give back: %+v", res)
	}
	if res, _ := s.Take(ctx, "k", q, 3); !res.Allowed {
		t.Fatalf("whole burst after the give-back: %+v", res)
	}
	// The key expires when the burst is whole again, never before.
	ttl, err := client.PTTL(ctx, "k").Result()
	if err != nil || ttl <= 2*time.Minute || ttl > 3*time.Minute {
		t.Fatalf("key TTL %s %v, want just under 3m", ttl, err)
	}
}

// A Redis that cannot be reached is ErrUnavailable, and the limiter
// refuses (fails closed) unless told to fail open; when Redis is back,
// counting resumes by itself.
func TestRedisOutage(t *testing.T) {
	srv := redistest.Start(t)
	lim := Limit{Key: []string{KeyAgent}, Rate: 5, Per: time.Minute}
	client := newRedisClient(t, srv.Addr())
	closed := newLimiter(t, NewRedis(client), false, lim)
	open := newLimiter(t, NewRedis(client), true, lim)
	srv.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if v := closed.Check(ctx, alice, []Call{{}}); !errors.Is(v.Err, ErrUnavailable) {
		t.Fatalf("Redis down, fail closed: %+v", v)
	}
	if v := open.Check(ctx, alice, []Call{{}}); v.Err != nil || v.Limited {
		t.Fatalf("Redis down, fail open: %+v", v)
	}
	srv.Restart()
	if v := closed.Check(context.Background(), alice, []Call{{}}); v.Err != nil || v.Limited {
		t.Fatalf("Redis back: %+v", v)
	}
}

// A Redis out of memory under noeviction refuses the count: the error
// says so (ErrOutOfMemory), not merely that the store is unreachable, so
// that the refusal and the warning can tell the operator to raise
// maxmemory. Fail closed either way.
func TestRedisOutOfMemory(t *testing.T) {
	srv := redistest.StartWith(t, "--maxmemory-policy", "noeviction")
	if out, err := srv.CLI("CONFIG", "SET", "maxmemory", "1"); err != nil {
		t.Fatalf("CONFIG SET maxmemory: %v %s", err, out)
	}
	lim := newLimiter(t, NewRedis(newRedisClient(t, srv.Addr())), false, Limit{Key: []string{KeyAgent}, Rate: 5, Per: time.Minute})
	v := lim.Check(context.Background(), alice, []Call{tool("search")})
	if !errors.Is(v.Err, ErrOutOfMemory) || !errors.Is(v.Err, ErrUnavailable) {
		t.Fatalf("count on a full Redis: %+v, want ErrOutOfMemory (and ErrUnavailable)", v)
	}
}
