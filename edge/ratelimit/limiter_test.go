package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

var (
	alice = Caller{Agent: "did:key:z6MkAgentA", User: "did:key:z6MkUserU"}
	bob   = Caller{Agent: "did:key:z6MkAgentB", User: "did:key:z6MkUserU"}
)

func tool(name string) Call { return Call{Tool: name, ToolCall: true} }

func newLimiter(t *testing.T, store Store, failOpen bool, limits ...Limit) *Limiter {
	t.Helper()
	l, err := New(limits, store, Options{Prefix: "p:", FailOpen: failOpen})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestLimiterPerAgent(t *testing.T) {
	clk := newFake()
	l := newLimiter(t, NewMemory(0, clk.now), false, Limit{Key: []string{KeyAgent}, Rate: 2, Per: time.Minute})
	ctx := context.Background()
	for i := range 2 {
		if v := l.Check(ctx, alice, []Call{tool("search")}); v.Limited || v.Err != nil {
			t.Fatalf("call %d: %+v", i, v)
		}
	}
	// Any method counts against a limit keyed by agent alone.
	v := l.Check(ctx, alice, []Call{{}})
	if !v.Limited || v.RetryAfter != 30*time.Second || v.Limit.Kind() != "agent" {
		t.Fatalf("third call: %+v, want limited by agent, retry after 30s", v)
	}
	if v := l.Check(ctx, bob, []Call{tool("search")}); v.Limited {
		t.Fatal("another agent shares alice's counter")
	}
	// Anonymous callers have no agent: the limit does not apply.
	if v := l.Check(ctx, Caller{}, []Call{tool("search"), tool("search"), tool("search")}); v.Limited {
		t.Fatal("anonymous caller limited by an agent limit")
	}
}

func TestLimiterPerAgentAndTool(t *testing.T) {
	clk := newFake()
	l := newLimiter(t, NewMemory(0, clk.now), false, Limit{Key: []string{KeyAgent, KeyTool}, Rate: 1, Per: time.Second})
	ctx := context.Background()
	if v := l.Check(ctx, alice, []Call{tool("a"), tool("b"), {}}); v.Limited {
		t.Fatalf("one call each of two tools: %+v", v)
	}
	if v := l.Check(ctx, alice, []Call{tool("a")}); !v.Limited {
		t.Fatal("second call of a within the second allowed")
	}
	// Other methods do not count against a limit keyed by tool.
	if v := l.Check(ctx, alice, []Call{{}, {}, {}}); v.Limited {
		t.Fatal("non-tool calls limited by a tool limit")
	}
	if v := l.Check(ctx, bob, []Call{tool("a")}); v.Limited {
		t.Fatal("bob shares alice's counter for tool a")
	}
}

func TestLimiterBatchCountsEveryCall(t *testing.T) {
	clk := newFake()
	l := newLimiter(t, NewMemory(0, clk.now), false, Limit{Key: []string{KeyUser}, Rate: 3, Per: time.Minute})
	ctx := context.Background()
	if v := l.Check(ctx, alice, []Call{tool("a"), tool("a")}); v.Limited {
		t.Fatal(v)
	}
	v := l.Check(ctx, bob, []Call{tool("a"), {}}) // same user: 2 more of 3
	if !v.Limited || v.Calls != 2 {
		t.Fatalf("batch of two with one left: %+v", v)
	}
	if v := l.Check(ctx, bob, []Call{{}}); v.Limited {
		t.Fatal("the refused batch took calls")
	}
	// A batch larger than the burst never passes, and says so.
	clk.advance(time.Hour)
	v = l.Check(ctx, alice, []Call{{}, {}, {}, {}})
	if !v.Limited || v.RetryAfter != 0 || v.Calls != 4 {
		t.Fatalf("batch over the burst: %+v", v)
	}
}

func TestLimiterRefusalGivesBackOtherLimits(t *testing.T) {
	clk := newFake()
	l := newLimiter(t, NewMemory(0, clk.now), false,
		Limit{Key: []string{KeyAgent}, Rate: 10, Per: time.Minute},
		Limit{Key: []string{KeyTool}, Rate: 1, Per: time.Minute},
	)
	ctx := context.Background()
	l.Check(ctx, alice, []Call{tool("x")})
	for range 20 {
		if v := l.Check(ctx, alice, []Call{tool("x")}); !v.Limited || v.Limit.Kind() != "tool" {
			t.Fatalf("tool x again: %+v", v)
		}
	}
	// The 20 refused calls did not eat alice's agent quota: 9 left.
	for i := range 9 {
		if v := l.Check(ctx, alice, []Call{tool(fmt.Sprint("y", i))}); v.Limited {
			t.Fatalf("call %d of alice's remaining 9: %+v", i, v)
		}
	}
	if v := l.Check(ctx, alice, []Call{tool("z")}); !v.Limited || v.Limit.Kind() != "agent" {
		t.Fatalf("11th: %+v", v)
	}
}

func TestLimiterTooManyTools(t *testing.T) {
	l := newLimiter(t, NewMemory(0, nil), false, Limit{Key: []string{KeyTool}, Rate: 100, Per: time.Second})
	calls := make([]Call, MaxToolsPerRequest+1)
	for i := range calls {
		calls[i] = tool(fmt.Sprint("t", i))
	}
	if v := l.Check(context.Background(), alice, calls); !v.Limited || !v.TooManyTools {
		t.Fatalf("%d distinct tools: %+v", len(calls), v)
	}
	if v := l.Check(context.Background(), alice, calls[:MaxToolsPerRequest]); v.Limited {
		t.Fatalf("%d distinct tools: %+v", MaxToolsPerRequest, v)
	}
}

// failingStore fails every Take after the first ok ones.
type failingStore struct {
	ok    int
	inner Store
}

func (f *failingStore) Take(ctx context.Context, key string, q Quota, n int) (Result, error) {
	if f.ok <= 0 {
		return Result{}, fmt.Errorf("%w: connection refused", ErrUnavailable)
	}
	f.ok--
	return f.inner.Take(ctx, key, q, n)
}

func TestLimiterStoreFailure(t *testing.T) {
	lim := Limit{Key: []string{KeyAgent}, Rate: 1, Per: time.Minute}
	closed := newLimiter(t, &failingStore{}, false, lim)
	v := closed.Check(context.Background(), alice, []Call{{}})
	if !errors.Is(v.Err, ErrUnavailable) || v.Limited {
		t.Fatalf("fail closed: %+v", v)
	}
	open := newLimiter(t, &failingStore{}, true, lim)
	if v := open.Check(context.Background(), alice, []Call{{}}); v.Err != nil || v.Limited {
		t.Fatalf("fail open: %+v", v)
	}
}
