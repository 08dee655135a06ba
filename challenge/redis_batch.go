package challenge

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync"

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
	err    error
	done   chan struct{}
}

var pendingMarkers = sync.Pool{New: func() any { return &pendingMarker{done: make(chan struct{}, 1)} }}

// markerBatcher is a store's group-commit writer of markers.
type markerBatcher struct {
	s *RedisStore

	mu     sync.Mutex
	queue  []*pendingMarker
	closed bool
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
	pipe  redis.Pipeliner
	cmds  []*redis.Cmd
	key   []byte
}

func newMarkerBatcher(s *RedisStore) *markerBatcher {
	return &markerBatcher{s: s, wake: make(chan struct{}, markerWriters), stop: make(chan struct{})}
}

// use queues the marker of digest (SET NX PX px) and waits for its batch.
// A request whose ctx ends first is refused (503); its marker may still
// be written, which only refuses the same proof again.
func (b *markerBatcher) use(ctx context.Context, digest [32]byte, px any) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: %w", ErrStoreUnavailable, err)
	}
	b.start.Do(func() {
		for range markerWriters {
			w := &markerWriter{b: b, pipe: b.s.client.Pipeline()}
			b.writers.Go(w.run)
		}
	})
	m := pendingMarkers.Get().(*pendingMarker)
	m.digest, m.px, m.err = digest, px, nil
	b.mu.Lock()
	switch {
	case b.closed:
		b.mu.Unlock()
		pendingMarkers.Put(m)
		return errBatchClosed
	case len(b.queue) >= maxQueued:
		b.mu.Unlock()
		pendingMarkers.Put(m)
		return errBatchFull
	}
	b.queue = append(b.queue, m)
	wake := b.idle > 0
	if wake {
		b.idle--
	}
	b.mu.Unlock()
	if wake {
		b.wake <- struct{}{} // buffered for every writer: never blocks
	}
	select {
	case <-m.done:
		err := m.err
		m.px, m.err = nil, nil
		pendingMarkers.Put(m)
		return err
	case <-ctx.Done():
		// m stays with the writer, which signals it into the void.
		return fmt.Errorf("%w: %w", ErrStoreUnavailable, ctx.Err())
	}
}

// run is a writer: it sends what is queued, batch after batch, and sleeps
// while nothing is.
func (w *markerWriter) run() {
	b := w.b
	for {
		b.mu.Lock()
		// The oldest, up to maxBatch; the rest moves up for the next.
		n := min(len(b.queue), maxBatch)
		w.batch = append(w.batch[:0], b.queue[:n]...)
		rest := copy(b.queue, b.queue[n:])
		clear(b.queue[rest:])
		b.queue = b.queue[:rest]
		closed := b.closed
		if n == 0 && !closed {
			b.idle++
		}
		b.mu.Unlock()
		if n > 0 {
			w.flush(w.batch)
			clear(w.batch)
			continue
		}
		if closed {
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
		m.done <- struct{}{}
	}
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
		m.done <- struct{}{}
	}
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
