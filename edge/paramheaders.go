package edge

import (
	"bytes"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/mcpi-edge/caddy-mcpi/mcp"
)

// x-mcp-header (MCP 2026-07-28): a tool's inputSchema may bind arguments to
// Mcp-Param-* headers, and a server that reads the body must refuse a 2026
// tools/call whose headers disagree with its arguments (-32020). The edge
// reads the body, so it checks them too, in the framing step: whatever
// routes or logs on those headers after the edge must see the arguments
// the upstream runs with.
//
// The bindings are the upstream's: they are learned from its own tools/list
// answers that the edge already reads (for tools/list filtering or the
// handshake-action check), per Host like the annotation classes, and never
// fetched. A tool the edge has not learned — no tools/list answer of that
// site went through it since start, the set is full, or its annotations are
// invalid (clients drop such a tool) — passes: its upstream checks it.

// Bounds of the learned bindings: the tool names and schemas are the
// upstream's, the Host the client's.
const (
	maxParamHeaderTools = 1024
	maxParamHeaderBytes = 256 << 10
)

// paramHeaderStore holds the x-mcp-header bindings learned per Host and tool.
type paramHeaderStore struct {
	// n mirrors len(m), so that a call finds an empty store without a lock.
	n atomic.Int32

	mu    sync.RWMutex
	m     map[string][]mcp.ParamHeader // learnedKey(host, tool)
	bytes int
}

func newParamHeaderStore() *paramHeaderStore {
	return &paramHeaderStore{m: make(map[string][]mcp.ParamHeader)}
}

// get returns the bindings of tool at host; nil when none were learned.
func (s *paramHeaderStore) get(host, tool string) []mcp.ParamHeader {
	if s == nil || s.n.Load() == 0 {
		return nil
	}
	s.mu.RLock()
	b := s.m[learnedKey(host, tool)]
	s.mu.RUnlock()
	return b
}

// set records the bindings of tool at host from a tools/list answer; nil
// (no annotations, or invalid ones) forgets the tool, since the upstream
// may drop them. A new tool is not learned once either bound is reached.
func (s *paramHeaderStore) set(host, tool string, bindings []mcp.ParamHeader) {
	if tool == "" || len(tool) > maxLearnedNameLen {
		return
	}
	key := learnedKey(host, tool)
	if len(bindings) == 0 && s.n.Load() == 0 {
		return
	}
	// Most lists repeat what was learned: no write lock for those.
	s.mu.RLock()
	old, known := s.m[key]
	s.mu.RUnlock()
	if known == (len(bindings) > 0) && slices.EqualFunc(old, bindings, sameBinding) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old, known = s.m[key]
	if known {
		s.bytes -= bindingsSize(key, old)
		delete(s.m, key)
	}
	if size := bindingsSize(key, bindings); len(bindings) > 0 &&
		len(s.m) < maxParamHeaderTools && s.bytes+size <= maxParamHeaderBytes {
		s.m[key] = bindings
		s.bytes += size
	}
	s.n.Store(int32(len(s.m)))
}

func sameBinding(a, b mcp.ParamHeader) bool {
	return a.Header == b.Header && slices.Equal(a.Path, b.Path)
}

// bindingsSize is what an entry costs, roughly: its key and strings.
func bindingsSize(key string, bindings []mcp.ParamHeader) int {
	n := len(key)
	for _, b := range bindings {
		n += len(b.Header) + 16
		for _, p := range b.Path {
			n += len(p) + 16
		}
	}
	return n
}

// learn records the bindings of every tool listed in body, an upstream
// answer (or SSE event) to the requests ids, at host. A body without the
// text x-mcp-header is walked only when something is learned, to forget
// the tools it lists.
func (s *paramHeaderStore) learn(host string, body []byte, ids map[string]string) {
	if s == nil || (s.n.Load() == 0 && !bytes.Contains(body, []byte("x-mcp-header"))) {
		return
	}
	_ = mcp.EachListedParamHeaders(body, ids, func(tool string, b []mcp.ParamHeader, _ error) {
		s.set(host, tool, b)
	})
}

// checkParamHeaders checks the Mcp-Param-* headers of a 2026 tools/call m
// (framing already accepted) against the bindings learned for its tool.
func (h *Handler) checkParamHeaders(r *http.Request, m mcp.Message) error {
	s := h.policy.params
	if s == nil || s.n.Load() == 0 || m.Method != mcp.MethodToolsCall {
		return nil
	}
	name, _ := mcp.ToolCallName(m)
	return mcp.CheckParamHeaders(r.Header, m.Params, s.get(h.serviceHost(r), name))
}
