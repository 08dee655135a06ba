package kyaos

import "sync"

// scratch holds the buffers of one verification: the request's canonical
// form, hashed for requestHash, and the proof's decoded protected header.
// They are pooled because a proof is checked on every request that has
// one, and neither can live on the stack (what reads them keeps its
// arguments, to the compiler's eye).
type scratch struct{ canon, hdr []byte }

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// maxPooledScratch bounds what a buffer keeps for the next request: one
// grown larger by a large request is let go.
const maxPooledScratch = 64 << 10

func getScratch() *scratch { return scratchPool.Get().(*scratch) }

// release returns s to the pool; nothing may use it, or what was read
// into it, afterwards.
func (s *scratch) release() {
	if cap(s.canon) > maxPooledScratch {
		s.canon = nil
	}
	if cap(s.hdr) > maxPooledScratch {
		s.hdr = nil
	}
	scratchPool.Put(s)
}

// grown returns b emptied, with room for n bytes.
func grown(b []byte, n int) []byte {
	if cap(b) < n {
		return make([]byte, 0, n)
	}
	return b[:0]
}
