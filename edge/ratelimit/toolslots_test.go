package ratelimit

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/internal/redistest"
)

// One caller naming invented tools under a limit keyed by tool starts at
// most MaxToolsPerCaller counters, then is refused (with when to retry);
// the store keeps room for every other caller, in memory and in Redis.
// Counters already started keep counting, and after the limit's span the
// caller may start new ones.
func TestLimiterToolCountersPerCaller(t *testing.T) {
	lim := Limit{Key: []string{KeyAgent, KeyTool}, Rate: 10, Per: time.Minute}
	clk := newFake()
	srv := redistest.Start(t)
	for _, tc := range []struct {
		name  string
		store Store
	}{
		{"memory", NewMemory(2*MaxToolsPerCaller+10, clk.now)},
		{"redis", NewRedis(newRedisClient(t, srv.Addr()))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLimiter(t, tc.store, false, lim)
			ctx := context.Background()
			for i := range MaxToolsPerCaller {
				if v := l.Check(ctx, alice, []Call{tool(fmt.Sprint("t", i))}); v.Limited || v.Err != nil {
					t.Fatalf("tool %d: %+v", i, v)
				}
			}
			v := l.Check(ctx, alice, []Call{tool("one-too-many")})
			if !v.Limited || !v.ToolCounters || v.RetryAfter <= 0 || v.RetryAfter > time.Minute {
				t.Fatalf("tool %d: %+v, want refused for too many tool counters, retry within the minute", MaxToolsPerCaller, v)
			}
			// A tool already counted is still counted, not refused.
			if v := l.Check(ctx, alice, []Call{tool("t0")}); v.Limited || v.Err != nil {
				t.Fatalf("a tool alice counts already: %+v", v)
			}
			// Another caller still gets counters of its own.
			for i := range 5 {
				if v := l.Check(ctx, bob, []Call{tool(fmt.Sprint("t", i))}); v.Limited || v.Err != nil {
					t.Fatalf("bob, tool %d: %+v", i, v)
				}
			}
			if m, ok := tc.store.(*Memory); ok {
				if n := m.Len(); n > 2*MaxToolsPerCaller+10 {
					t.Fatalf("%d keys", n)
				}
				clk.advance(time.Minute)
				if v := l.Check(ctx, alice, []Call{tool("later")}); v.Limited || v.Err != nil {
					t.Fatalf("a new tool a minute later: %+v", v)
				}
			}
		})
	}
}

// Under a limit keyed by tool alone, the bound is per caller too: one
// agent's invented tools do not use up the counters other agents start.
func TestLimiterToolCountersToolAlone(t *testing.T) {
	clk := newFake()
	l := newLimiter(t, NewMemory(0, clk.now), false, Limit{Key: []string{KeyTool}, Rate: 10, Per: time.Minute})
	ctx := context.Background()
	for i := range MaxToolsPerCaller {
		if v := l.Check(ctx, alice, []Call{tool(fmt.Sprint("t", i))}); v.Limited {
			t.Fatalf("tool %d: %+v", i, v)
		}
	}
	if v := l.Check(ctx, alice, []Call{tool("x")}); !v.ToolCounters {
		t.Fatalf("alice's tool %d: %+v", MaxToolsPerCaller, v)
	}
	if v := l.Check(ctx, bob, []Call{tool("x")}); v.Limited {
		t.Fatalf("bob's first tool: %+v", v)
	}
}
