package observe

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/mcpi-edge/caddy-mcpi/edge/observe/observetest"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

const auditName = "mcpi." + AuditLoggerName

// gatedCore passes entries to its inner core, except that each audit entry
// first waits for a token on gate (nil: no wait); entered gets a value
// when an audit entry starts waiting, if there is room. Other entries (the WARN about
// drops) pass at once.
type gatedCore struct {
	zapcore.Core
	gate    chan struct{}
	entered chan struct{}
}

func (c *gatedCore) With(f []zapcore.Field) zapcore.Core {
	return &gatedCore{Core: c.Core.With(f), gate: c.gate, entered: c.entered}
}

func (c *gatedCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c *gatedCore) Write(e zapcore.Entry, f []zapcore.Field) error {
	if e.LoggerName == auditName && c.gate != nil {
		select {
		case c.entered <- struct{}{}:
		default:
		}
		<-c.gate
	}
	return c.Core.Write(e, f)
}

// newGatedRecorder is a Recorder with metrics, whose logs go to an
// observer through a gatedCore.
func newGatedRecorder(t *testing.T, gate, entered chan struct{}) (*Recorder, *prometheus.Registry, *observer.ObservedLogs) {
	t.Helper()
	obs, logs := observer.New(zapcore.InfoLevel)
	reg := prometheus.NewRegistry()
	rec, err := New(Options{
		Registerer: reg,
		Logger:     zap.New(&gatedCore{Core: obs, gate: gate, entered: entered}).Named("mcpi"),
		Request:    Request{Upstream: func(*http.Request) string { return "https://api.example.com" }},
	})
	if err != nil {
		t.Fatal(err)
	}
	return rec, reg, logs
}

// auditDecision is the i-th of a varied run of decisions.
func auditDecision(i int) (*http.Request, Decision) {
	r := httptest.NewRequest(http.MethodPost, fmt.Sprintf("/mcp/%d?token=secret", i), nil)
	r.RemoteAddr = "192.0.2.7:4711"
	switch i % 3 {
	case 0:
		return r, Decision{Outcome: "admitted", Reason: "ok", Status: 200, Carrier: "authorization",
			Delegation: &vc.Delegation{AgentDID: testAgentDID, UserDID: testUserDID, DelegationID: fmt.Sprint("del-", i),
				Issuer: testUserDID, Scopes: []string{"tools:read", fmt.Sprint("s", i)}}}
	case 1:
		return r, Decision{Outcome: "rejected", Reason: "expired", Status: 401}
	}
	return nil, Decision{Outcome: "denied", Reason: "insufficient_scope", Status: 403, Tool: fmt.Sprint("tool_", i)}
}

// auditKey tells auditDecision's entries apart: by path, or by tool for
// those without a request.
func auditKey(e observer.LoggedEntry) string {
	m := e.ContextMap()
	if p, ok := m["path"].(string); ok {
		return p
	}
	return fmt.Sprint(m["tool"])
}

// TestAuditQueueEntriesIntact: entries written by the queue's writer are
// those the synchronous path writes, field for field and in the order of
// the decisions, stamped with the time of their decision, not of the
// write.
func TestAuditQueueEntriesIntact(t *testing.T) {
	const n = 300
	gate := make(chan struct{})
	rec, _, logs := newGatedRecorder(t, gate, nil)
	syncRec, _, syncLogs := newGatedRecorder(t, nil, nil)
	syncRec.queue = nil // the synchronous path, as before the queue
	syncRec.idPrefix = rec.idPrefix

	var before, after [n]time.Time
	for i := range n {
		r, d := auditDecision(i)
		before[i] = time.Now()
		rec.Decision(r, d)
		after[i] = time.Now()
		syncRec.Decision(r, d)
	}
	if got := logs.FilterLoggerName(auditName).Len(); got != 0 {
		t.Fatalf("%d entries written while the log was blocked: the request path wrote them", got)
	}
	written := time.Now()
	close(gate)
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	got, want := logs.FilterLoggerName(auditName).All(), syncLogs.FilterLoggerName(auditName).All()
	if len(got) != n || len(want) != n {
		t.Fatalf("%d entries queued, %d written synchronously, want %d each", len(got), len(want), n)
	}
	for i := range got {
		if g, w := got[i].ContextMap(), want[i].ContextMap(); !reflect.DeepEqual(g, w) {
			t.Fatalf("entry %d:\n got %v\nwant %v", i, g, w)
		}
		if got[i].Message != AuditMessage || got[i].Level != zapcore.InfoLevel {
			t.Errorf("entry %d: %v %q", i, got[i].Level, got[i].Message)
		}
		if ts := got[i].Time; ts.Before(before[i]) || ts.After(after[i]) || !ts.Before(written) {
			t.Errorf("entry %d stamped %v, not the time of its decision (%v to %v)", i, ts, before[i], after[i])
		}
	}
}

// TestAuditQueueCloseFlushes: Close returns once every queued entry is
// written; an entry recorded after Close is written at once.
func TestAuditQueueCloseFlushes(t *testing.T) {
	const n = 50
	gate := make(chan struct{})
	rec, _, logs := newGatedRecorder(t, gate, nil)
	for i := range n {
		rec.Decision(auditDecision(i))
	}
	// Let the entries through one by one, while Close waits.
	go func() {
		for range n + 1 {
			gate <- struct{}{}
		}
	}()
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	if got := logs.FilterLoggerName(auditName).Len(); got != n {
		t.Fatalf("Close returned with %d of %d entries written", got, n)
	}
	rec.Decision(auditDecision(n))
	if got := logs.FilterLoggerName(auditName).Len(); got != n+1 {
		t.Fatalf("entry after Close not written at once: %d entries", got)
	}
	if err := rec.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// TestAuditQueueFullDrops: when the log cannot keep up and the queue is
// full, entries are dropped and counted, the edge's log gets one WARN with
// the count (rate-limited), and the entries that were queued are written
// in order.
func TestAuditQueueFullDrops(t *testing.T) {
	gate, entered := make(chan struct{}), make(chan struct{}, 1)
	rec, reg, logs := newGatedRecorder(t, gate, entered)
	rec.queue.maxEntries = 4

	rec.Decision(auditDecision(0))
	<-entered // the writer holds entry 0 and waits on the log
	for i := 1; i < 10; i++ {
		rec.Decision(auditDecision(i)) // 1..3 fill the queue, 4..9 are dropped
	}
	const dropped = 6
	if got := observetest.Value(observetest.Gather(t, reg), "caddy_mcpi_audit_entries_dropped_total"); got != dropped {
		t.Errorf("caddy_mcpi_audit_entries_dropped_total = %v, want %d", got, dropped)
	}
	warns := logs.FilterLevelExact(zapcore.WarnLevel).All()
	if len(warns) != 1 || warns[0].LoggerName != "mcpi" || warns[0].ContextMap()["dropped"] != int64(1) {
		t.Fatalf("WARN about drops: %v, want one, on the edge's log, at the first drop", warns)
	}

	go func() {
		for range 4 {
			gate <- struct{}{}
		}
		close(gate)
	}()
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, e := range logs.FilterLoggerName(auditName).All() {
		paths = append(paths, auditKey(e))
	}
	if fmt.Sprint(paths) != "[/mcp/0 /mcp/1 tool_2 /mcp/3]" {
		t.Errorf("written entries %v, want the four queued ones in order", paths)
	}

	// The byte bound: an entry that would take the queue over it is
	// dropped too.
	rec2, reg2, _ := newGatedRecorder(t, nil, nil)
	rec2.queue.maxBytes = 100
	rec2.Decision(auditDecision(0))
	if got := observetest.Value(observetest.Gather(t, reg2), "caddy_mcpi_audit_entries_dropped_total"); got != 1 {
		t.Errorf("entry over the byte bound: dropped %v, want 1", got)
	}
	observetest.Lint(t, reg)
}

// TestAuditQueueWarnRateLimited: drops after the first WARN are counted
// into the next one, which comes only after auditDropWarnEvery.
func TestAuditQueueWarnRateLimited(t *testing.T) {
	obs, logs := observer.New(zapcore.WarnLevel)
	q := newAuditQueue(func(*auditEntry) {}, zap.New(obs), nil)
	for range 5 {
		q.drop()
	}
	// As if the last WARN were auditDropWarnEvery ago.
	q.lastWarn.Add(-int64(auditDropWarnEvery))
	q.drop()
	var counts []any
	for _, e := range logs.All() {
		counts = append(counts, e.ContextMap()["dropped"])
	}
	if fmt.Sprint(counts) != "[1 5]" {
		t.Errorf("WARN drop counts %v, want [1 5]", counts)
	}
}

// TestAuditQueueConcurrent: decisions from many goroutines at once are
// each written exactly once (run with -race).
func TestAuditQueueConcurrent(t *testing.T) {
	rec, _, logs := newGatedRecorder(t, nil, nil)
	const workers, each = 8, 200
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				rec.Decision(auditDecision(w*each + i))
			}
		})
	}
	wg.Wait()
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	seen := make(map[string]bool)
	for _, e := range logs.FilterLoggerName(auditName).All() {
		key := auditKey(e)
		if seen[key] {
			t.Fatalf("entry %s written twice", key)
		}
		seen[key] = true
	}
	if len(seen) != workers*each {
		t.Errorf("%d distinct entries written, want %d", len(seen), workers*each)
	}
}

// BenchmarkAuditEntry: what one audit entry costs the request that records
// it, written synchronously (as before the queue) and queued, to a JSON
// file as Caddy writes logs.
func BenchmarkAuditEntry(b *testing.B) {
	for _, mode := range []string{"sync", "queued"} {
		b.Run(mode, func(b *testing.B) {
			f, err := os.Create(filepath.Join(b.TempDir(), "audit.log"))
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			core := zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), f, zapcore.InfoLevel)
			rec, err := New(Options{Logger: zap.New(core), Request: Request{
				Upstream:  func(*http.Request) string { return "https://api.example.com" },
				RequestID: func(*http.Request) string { return "6b1c0f4e-94e4-4b5e-a3c5-5b1d9a3e2f10" },
			}})
			if err != nil {
				b.Fatal(err)
			}
			if mode == "sync" {
				rec.queue = nil
			}
			var dropped int
			if rec.queue != nil {
				rec.queue.dropped = func() { dropped++ }
			}
			r, d := auditDecision(0)
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				rec.Decision(r, d)
				// A loop records faster than a file takes entries: let the
				// writer catch up, off the clock, before the queue is full
				// (the drops are reported, and should be 0).
				if i%1024 == 1023 {
					b.StopTimer()
					if err := rec.Flush(); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
			}
			b.StopTimer()
			if err := rec.Close(); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(dropped)/float64(b.N), "drops/op")
		})
	}
}

// TestAuditQueueDelayedWriter: the writer of an idle queue starts after
// its delay and writes without a Flush; with a delay too long to wait
// for, Flush starts it at once, and so does a queue filling up
// (auditWriteSoon entries), so that a burst is written, not dropped.
func TestAuditQueueDelayedWriter(t *testing.T) {
	written := func(logs *observer.ObservedLogs) int { return logs.FilterLoggerName(auditName).Len() }
	waitFor := func(t *testing.T, logs *observer.ObservedLogs, n int) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); written(logs) < n; {
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d entries written without a Flush", written(logs), n)
			}
			time.Sleep(time.Millisecond)
		}
	}

	t.Run("delay", func(t *testing.T) {
		rec, _, logs := newGatedRecorder(t, nil, nil)
		for i := range 3 {
			rec.Decision(auditDecision(i))
		}
		waitFor(t, logs, 3)
		rec.Decision(auditDecision(3)) // the queue was idle again
		waitFor(t, logs, 4)
	})
	t.Run("flush", func(t *testing.T) {
		rec, _, logs := newGatedRecorder(t, nil, nil)
		rec.queue.delay = time.Hour
		rec.Decision(auditDecision(0))
		if got := written(logs); got != 0 {
			t.Fatalf("%d entries written before the writer's delay", got)
		}
		if err := rec.Flush(); err != nil || written(logs) != 1 {
			t.Fatalf("Flush: %v, %d entries written, want 1", err, written(logs))
		}
		rec.Decision(auditDecision(1))
		if err := rec.Close(); err != nil || written(logs) != 2 {
			t.Fatalf("Close: %v, %d entries written, want 2", err, written(logs))
		}
	})
	t.Run("filling", func(t *testing.T) {
		rec, reg, logs := newGatedRecorder(t, nil, nil)
		rec.queue.delay = time.Hour
		for i := range auditWriteSoon - 1 {
			rec.Decision(auditDecision(i))
		}
		time.Sleep(20 * time.Millisecond)
		if got := written(logs); got != 0 {
			t.Fatalf("%d entries written before the queue filled up", got)
		}
		rec.Decision(auditDecision(auditWriteSoon))
		waitFor(t, logs, auditWriteSoon)
		if got := observetest.Value(observetest.Gather(t, reg), "caddy_mcpi_audit_entries_dropped_total"); got != 0 {
			t.Errorf("%v entries dropped", got)
		}
	})
}
