package observe

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// The audit log is written off the request path: a decision takes its
// entry's strings from the request and queues them; a writer goroutine
// encodes and writes them, in the order they were queued, stamped with the
// time of the decision. Encoding an entry and the log's write(2) then no
// longer add to a request's latency.
//
// The queue is bounded in entries and in bytes. When the log cannot keep up
// and the queue is full, an entry is dropped, never silently: it is counted
// in caddy_mcpi_audit_entries_dropped_total and the edge's log gets a WARN
// (at most one every auditDropWarnEvery) with how many were dropped since
// the last one. Close writes everything queued before it returns; an entry
// recorded after Close is written at once, on the caller's goroutine.
//
// The writer runs only while there is something to write and exits when
// the queue is empty, so a recorder that is never closed leaves no
// goroutine behind. It starts auditWriteDelay after the first entry of an
// idle queue, so that it writes the entries of that while in one run: a
// writer started for every entry, as a busy edge's requests come and the
// queue empties between them, cost a goroutine start and a wake-up of an
// idle thread per request. A queue filling up (auditWriteSoon) starts it
// at once, and Flush and Close do not wait for it.

const (
	// maxAuditQueue bounds the entries waiting to be written: about a
	// second of a busy edge's decisions.
	maxAuditQueue = 8192
	// maxAuditQueueBytes bounds what they keep alive (their strings:
	// paths and hosts are the client's and may be long).
	maxAuditQueueBytes = 8 << 20
	// auditDropWarnEvery rate-limits the WARN about dropped entries.
	auditDropWarnEvery = 10 * time.Second
	// auditCloseWait bounds how long Close waits for a log that does not
	// take its writes: a hung log file must not hang a config reload.
	auditCloseWait = 10 * time.Second
	// auditWriteDelay is how long an entry may wait for the writer to
	// start: how late an entry can appear in the log (its timestamp is
	// that of its decision all the same).
	auditWriteDelay = 10 * time.Millisecond
	// auditWriteSoon is how many queued entries start the writer without
	// waiting for auditWriteDelay: far below maxAuditQueue, so that a
	// burst is not dropped while the writer sleeps.
	auditWriteSoon = maxAuditQueue / 8
)

// auditQueue holds audit entries until its writer writes them.
type auditQueue struct {
	write func(*auditEntry)
	// warn logs the WARN about drops (the edge's logger, not the audit
	// log, which may be what is slow).
	warn *zap.Logger
	// dropped counts into caddy_mcpi_audit_entries_dropped_total; nil
	// without metrics.
	dropped func()

	maxEntries, maxBytes int

	mu sync.Mutex
	// pending is what waits to be written; the writer swaps it with spare
	// and writes a whole batch per lock.
	pending, spare []auditEntry
	// queued counts entries and bytes queued and not yet written,
	// including the batch being written.
	queued, bytes int
	// writing: a writer goroutine runs, or is due to start (armed).
	writing bool
	// armed: the writer waits on timer, which starts it after delay.
	armed  bool
	timer  *time.Timer
	delay  time.Duration
	closed bool
	// drained is signalled when the writer stops (nothing left).
	drained *sync.Cond

	// droppedSinceWarn and lastWarn (unix nanoseconds) rate-limit the WARN.
	droppedSinceWarn atomic.Int64
	lastWarn         atomic.Int64
}

func newAuditQueue(write func(*auditEntry), warn *zap.Logger, dropped func()) *auditQueue {
	q := &auditQueue{write: write, warn: warn, dropped: dropped, maxEntries: maxAuditQueue, maxBytes: maxAuditQueueBytes,
		delay: auditWriteDelay}
	q.drained = sync.NewCond(&q.mu)
	q.timer = time.AfterFunc(time.Hour, q.run)
	q.timer.Stop()
	return q
}

// push queues a copy of e for the writer, starting it if none runs, or
// drops it if the queue is full. It returns false after Close: the caller
// then writes e itself. (Not writing it here keeps e on the caller's
// stack.)
func (q *auditQueue) push(e *auditEntry) bool {
	size := e.size()
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return false
	}
	if q.queued >= q.maxEntries || q.bytes+size > q.maxBytes {
		q.mu.Unlock()
		q.drop()
		return true
	}
	q.pending = append(q.pending, *e)
	q.queued++
	q.bytes += size
	switch {
	case !q.writing:
		q.writing, q.armed = true, true
		q.timer.Reset(q.delay)
	case q.armed && q.queued >= auditWriteSoon:
		q.startNow()
	}
	q.mu.Unlock()
	return true
}

// startNow starts the armed writer at once instead of after its delay.
// q.mu is held.
func (q *auditQueue) startNow() {
	if q.timer.Stop() {
		// Stopped before it fired: the writer is this goroutine's to
		// start. (Otherwise it fired and run is waiting for q.mu.)
		q.armed = false
		go q.run()
	}
}

// run writes batches until the queue is empty.
func (q *auditQueue) run() {
	q.mu.Lock()
	q.armed = false
	for len(q.pending) > 0 {
		batch := q.pending
		q.pending = q.spare[:0]
		q.mu.Unlock()
		size := 0
		for i := range batch {
			size += batch[i].size()
			q.write(&batch[i])
		}
		// The batch must not keep the requests' strings alive.
		clear(batch)
		q.mu.Lock()
		q.spare = batch[:0]
		q.queued -= len(batch)
		q.bytes -= size
	}
	q.writing = false
	q.drained.Broadcast()
	q.mu.Unlock()
}

// drop counts one dropped entry and warns, at most once every
// auditDropWarnEvery, with how many were dropped since the last WARN.
func (q *auditQueue) drop() {
	if q.dropped != nil {
		q.dropped()
	}
	q.droppedSinceWarn.Add(1)
	now := time.Now().UnixNano()
	last := q.lastWarn.Load()
	if now-last < int64(auditDropWarnEvery) || !q.lastWarn.CompareAndSwap(last, now) {
		return
	}
	if q.warn != nil {
		q.warn.Warn("audit log cannot keep up: entries dropped",
			zap.Int64("dropped", q.droppedSinceWarn.Swap(0)),
			zap.Int("queue_entries", q.maxEntries),
			zap.Duration("warn_every", auditDropWarnEvery))
	}
}

// close makes later entries be written at once and flushes.
func (q *auditQueue) close(wait time.Duration) error {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	return q.flush(wait)
}

// flush waits until every entry queued so far is written, or until wait
// has passed: then it says how many still wait (they are not dropped: the
// writer still writes them if the log recovers).
func (q *auditQueue) flush(wait time.Duration) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.writing {
		return nil
	}
	if q.armed {
		q.startNow()
	}
	// sync.Cond has no timeout: a timer wakes the wait once wait passed.
	timedOut := false
	t := time.AfterFunc(wait, func() {
		q.mu.Lock()
		timedOut = true
		q.drained.Broadcast()
		q.mu.Unlock()
	})
	defer t.Stop()
	for q.writing && !timedOut {
		q.drained.Wait()
	}
	if q.writing {
		return fmt.Errorf("mcpi: audit log: %d entries not yet written after %v", q.queued, wait)
	}
	return nil
}
