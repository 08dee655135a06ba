package challenge

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Single-use markers are written by group commit: a request's UseOnce
// queues its marker and waits; a writer goroutine of the store (one of
// markerWriters) takes everything queued and sends it to the master as
// one pipeline (one write, one read, one round trip), then answers every
// request of the batch. Under load the batch grows with the requests in
// flight, so the edge and Redis each pay a few system calls per batch
// instead of per request; an idle edge sends batches of one, as before.
//
// The guarantees stay those of one SET NX per request: every marker is its
// own SET NX (so of two requests with one digest, at most one succeeds,
// in a batch or across replicas), nothing is retried (a batch whose
// connection fails fails every request in it, 503), and where replicas
// must acknowledge, one WAIT at the end of the pipeline covers every SET
// before it on that connection: WAIT returns once the replicas hold
// everything the connection wrote. When too few acknowledge, each marker
// the batch made is deleted again (if it still holds its token) and every
// request in it is refused with ErrReplicasNotAcked.
//
// A request is answered only once its outcome is final (acknowledged, or
// taken back): a second request for a digest this process has queued or
// in flight is not sent, and gets the first one's outcome (copyOutcome),
// never a replay of a write that is then taken back. A queued marker is
// sent only while its request waits and for at most the store's timeout
// (take): a stalled Redis neither receives markers nobody waits for nor
// holds a request longer than about that timeout behind the batches
// ahead of it.
//
// A Redis Cluster keeps one command per request: a batch would span
// nodes, and the client's MOVED handling and the per-node WAIT are kept
// as they are.

const (
	// maxBatch bounds the markers of one pipeline.
	maxBatch = 256
	// maxQueued bounds the markers waiting for the writer: beyond it a
	// request is refused (503) rather than queued behind a Redis that
	// cannot keep up.
	maxQueued = 8192
)

// errBatchFull is the refusal of a marker that found the queue full.
var errBatchFull = fmt.Errorf("%w: too many single-use writes waiting for Redis (%d); "+
	"Redis is slow or unreachable from this edge: check its latency, or add replicas of the edge", ErrStoreUnavailable, maxQueued)

// errBatchClosed is the refusal of a marker after Close.
var errBatchClosed = fmt.Errorf("%w: Redis store closed", ErrStoreUnavailable)

// pendingMarker is one queued marker and, once done is signalled, its
// outcome.
type pendingMarker struct {
	digest [32]byte
	px     any
	// ctx is the request's: a marker whose request ended before its
	// batch was sent is not sent.
	ctx context.Context
	// deadline (Unix nanoseconds) is when the marker, still queued, is
	// refused instead of sent (markerBatcher.maxWait).
	deadline int64
	err      error
	done     chan struct{}
	// copies are the requests for the same digest that came while this
	// one was queued or in flight: they are answered with its outcome
	// (copyOutcome), never sent.
	copies []*pendingMarker
}

var pendingMarkers = sync.Pool{New: func() any { return &pendingMarker{done: make(chan struct{}, 1)} }}

// markerBatcher is a store's group-commit writer of markers.
type markerBatcher struct {
	s *RedisStore
	// maxWait bounds a marker's time in the queue: about the store's
	// timeout, so that while Redis stalls a request is refused (503) in
	// about the time one command would have taken to fail, not after
	// every batch queued before it has timed out in turn.
	maxWait time.Duration

	mu     sync.Mutex
	queue  []*pendingMarker
	closed bool
	// inflight holds each queued or sent marker by digest until it is
	// answered; copies counts the requests waiting on one of them.
	// Both are bounded with the queue (maxQueued).
	inflight map[[32]byte]*pendingMarker
	copies   int
	// idle counts the writers waiting for work.
	idle  int
	start sync.Once
	// wake tells an idle writer that the queue is no longer empty.
	wake    chan struct{}
	stop    chan struct{}
	writers sync.WaitGroup
}

// markerWriters is how many batches may be in flight at once: while one
// waits for its replies (and, with WAIT, for the replicas), the next is
// sent, so that a replica's round trip does not bound the edge's rate.
const markerWriters = 2

// markerWriter is one writer's own state, reused from batch to batch.
type markerWriter struct {
	b     *markerBatcher
	batch []*pendingMarker
	// dropped are the markers taken from the queue but not sent.
	dropped []*pendingMarker
	pipe    redis.Pipeliner
	cmds    []*redis.Cmd
	key     []byte
}

func newMarkerBatcher(s *RedisStore, maxWait time.Duration) *markerBatcher {
	return &markerBatcher{s: s, maxWait: maxWait, inflight: make(map[[32]byte]*pendingMarker),
		wake: make(chan struct{}, markerWriters), stop: make(chan struct{})}
}

// use queues the marker of digest (SET NX PX px) and waits for its batch.
// A request for a digest already queued or in flight from this process
// is not sent: it waits for that one's outcome (copyOutcome). A request
// whose ctx ends first is refused (503, requestEnded): its marker is not
// sent if its batch was not yet, and otherwise may still be written,
// which only refuses the same proof again.
func (b *markerBatcher) use(ctx context.Context, digest [32]byte, px any) error {
	if ctx.Err() != nil {
		return requestEnded(ctx)
	}
	b.start.Do(func() {
		for range markerWriters {
			w := &markerWriter{b: b, pipe: b.s.client.Pipeline()}
			b.writers.Go(w.run)
		}
	})
	m := pendingMarkers.Get().(*pendingMarker)
	m.digest, m.px, m.ctx, m.err = digest, px, ctx, nil
	m.deadline = time.Now().Add(b.maxWait).UnixNano()
	b.mu.Lock()
	switch {
	case b.closed:
		b.mu.Unlock()
		m.ctx = nil
		pendingMarkers.Put(m)
		return errBatchClosed
	case len(b.queue)+b.copies >= maxQueued:
		b.mu.Unlock()
		m.ctx = nil
		pendingMarkers.Put(m)
		return errBatchFull
	}
	wake := false
	if first, ok := b.inflight[digest]; ok {
		first.copies = append(first.copies, m)
		b.copies++
	} else {
		b.inflight[digest] = m
		b.queue = append(b.queue, m)
		if wake = b.idle > 0; wake {
			b.idle--
		}
	}
	b.mu.Unlock()
	if wake {
		b.wake <- struct{}{} // buffered for every writer: never blocks
	}
	select {
	case <-m.done:
		err := m.err
		m.px, m.ctx, m.err = nil, nil, nil
		pendingMarkers.Put(m)
		return err
	case <-ctx.Done():
		// m stays with the writer, which drops it unsent if its batch
		// was not sent yet, and signals it into the void.
		return requestEnded(ctx)
	}
}

// copyOutcome is the answer to a request whose digest was already queued
// or in flight from this process when it came, given that first one's
// outcome: a replay once the first is relied on (written and, where
// replicas must acknowledge, acknowledged) or found already used; else
// 503, so that the proof may be tried again, since the first did not
// use it up.
func copyOutcome(first error) error {
	if first == nil {
		return ErrNonceExists
	}
	if errors.Is(first, ErrNonceExists) && !errors.Is(first, ErrStoreUnavailable) {
		return first
	}
	return fmt.Errorf("%w: a request with the same proof, sent at the same moment, was not admitted either (%w); "+
		"the proof is not used up: try again", ErrStoreUnavailable, first)
}

// settle answers each marker of ms with its err, and every copy of it
// with copyOutcome; a later request for the digest goes to Redis again.
func (b *markerBatcher) settle(ms []*pendingMarker) {
	var copies int
	b.mu.Lock()
	for _, m := range ms {
		if b.inflight[m.digest] == m {
			delete(b.inflight, m.digest)
		}
		copies += len(m.copies)
	}
	b.copies -= copies
	b.mu.Unlock()
	for _, m := range ms {
		if len(m.copies) > 0 {
			out := copyOutcome(m.err)
			for i, c := range m.copies {
				c.err = out
				c.done <- struct{}{}
				m.copies[i] = nil
			}
			m.copies = m.copies[:0]
		}
		m.done <- struct{}{}
	}
}

// run is a writer: it sends what is queued, batch after batch, and sleeps
// while nothing is.
func (w *markerWriter) run() {
	b := w.b
	for {
		b.mu.Lock()
		w.take()
		n, dropped, closed := len(w.batch), len(w.dropped), b.closed
		if n == 0 && dropped == 0 && !closed {
			b.idle++
		}
		b.mu.Unlock()
		if dropped > 0 {
			b.settle(w.dropped)
			clear(w.dropped)
			w.dropped = w.dropped[:0]
		}
		switch {
		case n > 0:
			w.flush(w.batch)
			clear(w.batch)
			w.batch = w.batch[:0]
			continue
		case dropped > 0:
			continue // took only markers it must not send: look again
		case closed:
			return
		}
		select {
		case <-b.wake:
		case <-b.stop:
			b.mu.Lock()
			b.closed = true
			b.mu.Unlock()
		}
	}
}

// take moves the oldest queued markers into w.batch, up to maxBatch, and
// those it must not send into w.dropped, answered: a marker whose request
// ended (nobody waits for it, and writing it would only refuse the proof
// later) and one that waited past its deadline (Redis is too slow to
// answer it in time: 503). b.mu is held.
func (w *markerWriter) take() {
	b := w.b
	now := time.Now().UnixNano()
	k := 0
	for k < len(b.queue) && len(w.batch) < maxBatch {
		m := b.queue[k]
		switch {
		case m.ctx.Err() != nil:
			m.err = requestEnded(m.ctx)
			w.dropped = append(w.dropped, m)
			if c := b.promote(m); c != nil {
				b.queue[k] = c // looked at next, in m's place
				continue
			}
		case now >= m.deadline:
			m.err = b.s.health.note(b.errTooSlow())
			w.dropped = append(w.dropped, m)
		default:
			w.batch = append(w.batch, m)
		}
		k++
	}
	rest := copy(b.queue, b.queue[k:])
	clear(b.queue[rest:])
	b.queue = b.queue[:rest]
}

// promote puts the first copy of m, a marker whose request ended before
// it was sent, in its place, with the other copies: a copy's outcome
// must not be decided by a request that left. b.mu is held.
func (b *markerBatcher) promote(m *pendingMarker) *pendingMarker {
	if len(m.copies) == 0 {
		return nil
	}
	c := m.copies[0]
	c.copies = append(c.copies[:0], m.copies[1:]...)
	clear(m.copies)
	m.copies = m.copies[:0]
	b.copies--
	b.inflight[m.digest] = c
	return c
}

// errTooSlow is the refusal of a marker that waited in the queue past its
// deadline.
func (b *markerBatcher) errTooSlow() error {
	return fmt.Errorf("%w: a single-use write waited %v for Redis without being sent; Redis is slow or unreachable "+
		"from this edge: check its latency and the link to it", ErrStoreUnavailable, b.maxWait)
}

// flush writes batch as one pipeline and answers each of its requests.
func (w *markerWriter) flush(batch []*pendingMarker) {
	ctx := context.Background() // the client's read and write timeouts bound it
	b, s := w.b, w.b.s
	n, err := s.wait.target(ctx, s.client, "")
	if err != nil {
		s.failed("")
		b.answer(batch, s.health.note(err))
		return
	}
	var token []byte
	if n > 0 {
		if token, err = batchToken(); err != nil {
			b.answer(batch, err)
			return
		}
	}
	w.cmds = w.cmds[:0]
	for i, m := range batch {
		w.key = append(append(w.key[:0], s.prefix...), redisSingleUsePrefix...)
		w.key = hex.AppendEncode(w.key, m.digest[:])
		var val any = "1"
		if n > 0 {
			val = markerValue(token, i)
		}
		w.cmds = append(w.cmds, w.pipe.Do(ctx, "SET", string(w.key), val, "NX", "PX", m.px))
	}
	var wait *redis.Cmd
	if n > 0 {
		wait = w.pipe.Do(ctx, "WAIT", n, s.wait.timeoutArg)
	}
	_, _ = w.pipe.Exec(ctx)
	down := false
	for i, m := range batch {
		m.err = setReply(w.cmds[i])
		if n > 0 {
			m.err = foundUnacked(m.err)
		}
		down = down || errors.Is(m.err, ErrStoreUnavailable)
	}
	if down {
		s.failed("")
	}
	// Checked whatever else failed: a marker written beside a failed one
	// is relied on only once the replicas have it.
	if wait != nil {
		if err := s.acked(ctx, s.client, "", wait, n); err != nil {
			w.unwrite(ctx, batch, err)
		}
	}
	for _, m := range batch {
		m.err = s.health.note(m.err)
	}
	b.settle(batch)
	clear(w.cmds)
}

// unwrite deletes the markers of batch that too few replicas acknowledged,
// each only if it still holds its own token (best effort: a failed delete
// leaves a marker that expires by itself), and refuses their requests
// with err.
func (w *markerWriter) unwrite(ctx context.Context, batch []*pendingMarker, err error) {
	b := w.b
	cctx, cancel := context.WithTimeout(ctx, b.s.wait.timeout)
	defer cancel()
	p := b.s.client.Pipeline()
	for i, m := range batch {
		if m.err == nil {
			set := w.cmds[i]
			delIfScript.Eval(cctx, p, []string{set.Args()[1].(string)}, set.Args()[2])
			m.err = err
		}
	}
	_, _ = p.Exec(cctx)
}

// answer refuses every request of batch with err.
func (b *markerBatcher) answer(batch []*pendingMarker, err error) {
	for _, m := range batch {
		m.err = err
	}
	b.settle(batch)
}

// close refuses later markers, lets the writers send what is queued, and
// waits for them to stop (if they ever started).
func (b *markerBatcher) close() {
	started := true
	b.start.Do(func() { started = false })
	b.mu.Lock()
	again := b.closed
	b.closed = true
	b.mu.Unlock()
	if started && !again {
		close(b.stop)
		b.writers.Wait()
	}
}

// batchToken is a batch's random token; each marker of the batch holds it
// and its index (markerValue), so that a write refused for want of
// acknowledgement deletes only its own marker, never one another request
// made in the meantime.
func batchToken() ([]byte, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrStoreUnavailable, err)
	}
	return hex.AppendEncode(make([]byte, 0, 32+1+3), b[:]), nil
}

func markerValue(token []byte, i int) string {
	return string(strconv.AppendInt(append(token, '-'), int64(i), 10))
}
