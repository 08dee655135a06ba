package ratelimit

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"time"
)

// Call is one JSON-RPC request of an MCP message or batch, as the limits
// count it: a tools/call names its tool; every other request counts only
// against limits without a tool in their key.
type Call struct {
	// Tool is the name of a tools/call's tool.
	Tool string
	// ToolCall: the request is a tools/call.
	ToolCall bool
}

// Caller is who makes the calls: the verified DIDs, both "" for an
// anonymous caller (who counts only against limits keyed by tool alone).
type Caller struct {
	Agent, User string
}

// Verdict is the limits' answer to one request.
type Verdict struct {
	// Limited: a limit refuses the request (Limit says which).
	Limited bool
	// RetryAfter is when the request would be allowed again; 0 with
	// Limited when it never would, being more than the limit's burst.
	RetryAfter time.Duration
	// Limit is the limit that refused the request, or whose store failed.
	Limit Limit
	// Calls is how many calls of the request that limit counted (with
	// TooManyTools, how many distinct tools the request called).
	Calls int
	// TooManyTools: the request calls more than MaxToolsPerRequest
	// distinct tools under a limit keyed by tool.
	TooManyTools bool
	// ToolCounters: the caller started MaxToolsPerCaller counters of
	// distinct tools under a limit keyed by tool within its period, and
	// this request would start another (RetryAfter says when one frees).
	ToolCounters bool
	// Err is the store's failure (ErrUnavailable, ErrFull) when the
	// limiter fails closed: the request must be refused.
	Err error
}

// Limiter applies a set of limits, through one store, to requests.
type Limiter struct {
	limits   []compiled
	store    Store
	prefix   string
	failOpen bool
	metrics  *Metrics
}

type compiled struct {
	Limit
	id, kind          string
	agent, user, tool bool
	q                 Quota
	// slots counts the per-tool counters a caller starts under a limit
	// keyed by tool (toolSlots).
	slots Quota
}

// Options configure New.
type Options struct {
	// Prefix is prepended to every key the store sees.
	Prefix string
	// FailOpen lets requests through when the store cannot be reached;
	// by default they are refused.
	FailOpen bool
	// Metrics counts the decisions; nil counts nothing.
	Metrics *Metrics
}

// New checks limits and returns their limiter over store.
func New(limits []Limit, store Store, o Options) (*Limiter, error) {
	l := &Limiter{store: store, prefix: o.Prefix, failOpen: o.FailOpen, metrics: o.Metrics}
	for _, lim := range limits {
		if err := lim.Validate(); err != nil {
			return nil, err
		}
		c := compiled{Limit: lim, id: lim.id(), kind: lim.Kind(), q: lim.quota()}
		for _, k := range lim.Key {
			switch k {
			case KeyAgent:
				c.agent = true
			case KeyUser:
				c.user = true
			case KeyTool:
				c.tool = true
			}
		}
		if c.tool {
			c.slots = toolSlots(c.q)
		}
		l.limits = append(l.limits, c)
	}
	return l, nil
}

// taken is one count a request made, to give back if another limit refuses
// the request.
type taken struct {
	key string
	q   Quota
	n   int
}

// Check counts calls by caller against every limit, and says whether the
// request may go on. A request is counted whole or not at all: when one
// limit refuses it, what the limits before took is given back (one more
// round trip per limit, on that path only), so that a refused request does
// not eat into the caller's other quotas.
func (l *Limiter) Check(ctx context.Context, caller Caller, calls []Call) Verdict {
	v, _ := l.CheckTaken(ctx, caller, calls)
	return v
}

// Taken is what a request the limits allowed counted.
type Taken struct {
	l    *Limiter
	done []taken
}

// GiveBack returns what the request counted, for a request that turned
// out not to be served after all through no doing of its caller's (one
// whose proof had been used already: a replay). Best effort: a failure
// leaves the calls counted.
func (t Taken) GiveBack(ctx context.Context) {
	if t.l != nil {
		t.l.giveBack(ctx, t.done)
	}
}

// CheckTaken is Check, and what an allowed request counted: given back
// should the request not be served after all.
func (l *Limiter) CheckTaken(ctx context.Context, caller Caller, calls []Call) (Verdict, Taken) {
	if l == nil || len(calls) == 0 {
		return Verdict{}, Taken{}
	}
	var done []taken
	var tools []toolCount // the request's tools/calls by tool, on first need
	for i := range l.limits {
		c := &l.limits[i]
		if (c.agent && caller.Agent == "") || (c.user && caller.User == "") {
			continue // anonymous: only limits keyed by tool alone apply
		}
		if !c.tool {
			if v, ok := l.take(ctx, c, caller, "", len(calls), &done); !ok {
				return v, Taken{}
			}
			continue
		}
		if tools == nil {
			tools = byTool(calls)
		}
		if len(tools) > MaxToolsPerRequest {
			// Each tool is a round trip to the store: a batch naming
			// thousands would be thousands of them.
			l.metrics.count(c.kind, resultLimited)
			l.giveBack(ctx, done)
			return Verdict{Limited: true, Limit: c.Limit, Calls: len(tools), TooManyTools: true}, Taken{}
		}
		for _, t := range tools {
			if v, ok := l.take(ctx, c, caller, t.tool, t.n, &done); !ok {
				return v, Taken{}
			}
		}
	}
	return Verdict{}, Taken{l: l, done: done}
}

// MaxToolsPerRequest is the most distinct tools one request (a batch) may
// call under a limit keyed by tool.
const MaxToolsPerRequest = 32

// MaxToolsPerCaller is the most per-tool counters one caller (the parts
// of the caller the limit is keyed by, else the whole caller) starts under
// a limit keyed by tool within the span of that limit's burst. Tool names
// are the caller's to choose: without this bound one caller naming
// invented tools could make counters without end, filling a Memory store
// (and so refusing, or with FailOpen not counting, every new caller) or
// growing a Redis store without bound.
const MaxToolsPerCaller = 256

// toolSlots is the quota of new per-tool counters of a caller under a
// limit counting q: MaxToolsPerCaller over the span a counter lives at
// most (q's burst × interval), so that a caller holds at most twice that
// many live counters at once.
func toolSlots(q Quota) Quota {
	span := q.Interval * time.Duration(q.Burst)
	iv := span / MaxToolsPerCaller
	if iv < minInterval {
		iv = minInterval
	}
	return Quota{Interval: iv, Burst: MaxToolsPerCaller}
}

// toolCount is how many tools/calls of one request call tool.
type toolCount struct {
	tool string
	n    int
}

// byTool counts the tools/calls of calls by tool, in order of first call;
// an empty, non-nil slice when there are none.
func byTool(calls []Call) []toolCount {
	out := make([]toolCount, 0, 1)
	var index map[string]int // past a few tools, a map keeps this linear
	for _, c := range calls {
		if !c.ToolCall {
			continue
		}
		i := -1
		if index != nil {
			if j, ok := index[c.Tool]; ok {
				i = j
			}
		} else {
			for j := range out {
				if out[j].tool == c.Tool {
					i = j
					break
				}
			}
		}
		if i >= 0 {
			out[i].n++
			continue
		}
		out = append(out, toolCount{c.Tool, 1})
		if index == nil && len(out) > 8 {
			index = make(map[string]int, 2*len(out))
			for j, t := range out {
				index[t.tool] = j
			}
		} else if index != nil {
			index[c.Tool] = len(out) - 1
		}
	}
	return out
}

// take counts n calls against one counter of c; ok is false when the
// request must stop, with its verdict. What was taken is added to done.
func (l *Limiter) take(ctx context.Context, c *compiled, caller Caller, tool string, n int, done *[]taken) (Verdict, bool) {
	if n > c.q.Burst {
		// More than the limit ever allows at once: refused without
		// counting, however long the caller waits.
		l.metrics.count(c.kind, resultLimited)
		l.giveBack(ctx, *done)
		return Verdict{Limited: true, Limit: c.Limit, Calls: n}, false
	}
	res, v, ok := l.takeKey(ctx, c, l.key(c, caller, tool), c.q, n, done)
	if !ok {
		return v, false
	}
	if c.tool && res.Fresh && n > 0 {
		if v, ok := l.takeSlot(ctx, c, caller, done); !ok {
			return v, false
		}
	}
	l.metrics.count(c.kind, resultAllowed)
	return Verdict{}, true
}

// takeSlot counts a new per-tool counter of caller under c against the
// caller's MaxToolsPerCaller; ok is false when the request must stop,
// with its verdict (what it took, the new counter included, given back).
func (l *Limiter) takeSlot(ctx context.Context, c *compiled, caller Caller, done *[]taken) (Verdict, bool) {
	who := caller
	if c.agent || c.user {
		// The limit's own caller parts: a limit per agent and tool bounds
		// each agent, whoever its users.
		if !c.agent {
			who.Agent = ""
		}
		if !c.user {
			who.User = ""
		}
	}
	_, v, ok := l.takeKey(ctx, c, l.slotKey(c, who), c.slots, 1, done)
	if v.Limited {
		v.ToolCounters, v.Calls = true, MaxToolsPerCaller
	}
	return v, ok
}

// takeKey counts n against key, for c, under q; ok is false when the
// request must stop (refused, or the store failed and the limits fail
// closed), with its verdict and what it took given back. What was taken
// is added to done.
func (l *Limiter) takeKey(ctx context.Context, c *compiled, key string, q Quota, n int, done *[]taken) (Result, Verdict, bool) {
	res, err := l.store.Take(ctx, key, q, n)
	switch {
	case err != nil:
		l.metrics.count(c.kind, resultError)
		if l.failOpen {
			return Result{}, Verdict{}, true
		}
		l.giveBack(ctx, *done)
		return res, Verdict{Limit: c.Limit, Calls: n, Err: err}, false
	case !res.Allowed:
		l.metrics.count(c.kind, resultLimited)
		l.giveBack(ctx, *done)
		return res, Verdict{Limited: true, RetryAfter: res.RetryAfter, Limit: c.Limit, Calls: n}, false
	}
	*done = append(*done, taken{key, q, n})
	return res, Verdict{}, true
}

// giveBack returns what a refused request took. Best effort: a failure
// leaves the calls counted, which errs on the side of the limit.
func (l *Limiter) giveBack(ctx context.Context, done []taken) {
	for _, t := range done {
		_, _ = l.store.Take(ctx, t.key, t.q, -t.n)
	}
}

// key is the store key of c's counter for caller and tool: the limit's id
// and the parts of its key, hashed, so that a key has a bounded length and
// no DID appears in the store's key space. Parts the limit is not keyed by
// are left out, so every caller shares them.
func (l *Limiter) key(c *compiled, caller Caller, tool string) string {
	return l.hashKey(c.id, c.agent, c.user, c.tool, caller, tool)
}

// slotKey is the store key of the count of per-tool counters who started
// under c: apart from every counter of c (its own id), keyed by who's
// parts.
func (l *Limiter) slotKey(c *compiled, who Caller) string {
	return l.hashKey(c.id+"/tools", who.Agent != "", who.User != "", false, who, "")
}

func (l *Limiter) hashKey(id string, agent, user, tool bool, caller Caller, toolName string) string {
	h := sha256.New()
	h.Write([]byte(id))
	for _, p := range [...]struct {
		on bool
		v  string
	}{{agent, caller.Agent}, {user, caller.User}, {tool, toolName}} {
		h.Write([]byte{0})
		if p.on {
			h.Write([]byte(p.v))
		}
	}
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return l.prefix + hex.EncodeToString(sum[:16])
}
