package toolpolicy

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
// handshake-action check), and never fetched. They are kept per handler,
// that is per route, and by tool name only — not per Host: the Host is the
// client's to choose, so on a site that takes any Host a key holding the
// Host let a client pick one with nothing learned (no check), or fill the
// bound with lists fetched under invented Hosts. An upstream whose tools
// differ by Host belongs behind host-matched routes, one handler each.
//
// Only answers to 2026-era requests teach, 2026 by the header and by the
// body's _meta version both: x-mcp-header is a 2026 member, and an upstream
// may leave it out of its lists for older clients — including a request
// with the 2026 header but no _meta version, if it reads the era from the
// body — which must not make the edge forget it. A 2026 list replaces a listed tool's
// bindings or, when it shows the tool without them, forgets them (the
// upstream dropped them, and clients stop sending the headers); a tool a
// list leaves out keeps what was learned. A new tool is learned while the
// bounds allow; nothing is evicted for it, so once full, the tools learned
// first stay checked. A tool the edge has not learned — no 2026 tools/list
// answer of that route went through it since start, the set is full, or
// its annotations are unreadable (clients drop such a tool) — passes: its
// upstream checks it. A tool invalid only for the type of some annotated
// properties keeps its other bindings (mcp.ParamHeaders).

// Bounds of the learned bindings: the tool names and schemas are the
// upstream's.
const (
	maxParamHeaderTools = 1024
	maxParamHeaderBytes = 256 << 10
)

// paramHeaderStore holds the x-mcp-header bindings learned per tool, for
// one handler.
type paramHeaderStore struct {
	// n mirrors len(m), so that a call finds an empty store without a lock.
	n atomic.Int32

	mu    sync.RWMutex
	m     map[string][]mcp.ParamHeader // by tool name
	bytes int
}

func newParamHeaderStore() *paramHeaderStore {
	return &paramHeaderStore{m: make(map[string][]mcp.ParamHeader)}
}

// get returns the bindings of tool; nil when none were learned.
func (s *paramHeaderStore) get(tool string) []mcp.ParamHeader {
	if s == nil || s.n.Load() == 0 {
		return nil
	}
	s.mu.RLock()
	b := s.m[tool]
	s.mu.RUnlock()
	return b
}

// set records the bindings of tool from a 2026 tools/list answer; nil (no
// annotations, or invalid ones) forgets the tool. A new tool is not
// learned once either bound is reached; a known one is replaced in place.
func (s *paramHeaderStore) set(tool string, bindings []mcp.ParamHeader) {
	if tool == "" || len(tool) > maxLearnedNameLen {
		return
	}
	if len(bindings) == 0 && s.n.Load() == 0 {
		return
	}
	// Most lists repeat what was learned: no write lock for those.
	s.mu.RLock()
	old, known := s.m[tool]
	s.mu.RUnlock()
	if known == (len(bindings) > 0) && slices.EqualFunc(old, bindings, sameBinding) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old, known = s.m[tool]
	if known {
		s.bytes -= bindingsSize(tool, old)
		delete(s.m, tool)
	}
	if size := bindingsSize(tool, bindings); len(bindings) > 0 &&
		len(s.m) < maxParamHeaderTools && s.bytes+size <= maxParamHeaderBytes {
		s.m[tool] = bindings
		s.bytes += size
	}
	s.n.Store(int32(len(s.m)))
}

func sameBinding(a, b mcp.ParamHeader) bool {
	return a.Header == b.Header && a.Number == b.Number && slices.Equal(a.Path, b.Path)
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
// answer (or SSE event) to the requests ids of a request of era. Answers
// to 2025-era requests teach nothing. A body without the text x-mcp-header
// is walked only when something is learned, to forget the tools it lists.
func (s *paramHeaderStore) learn(era mcp.Era, body []byte, ids map[string]string) {
	if s == nil || era != mcp.Era2026 || (s.n.Load() == 0 && !bytes.Contains(body, []byte("x-mcp-header"))) {
		return
	}
	_ = mcp.EachListedParamHeaders(body, ids, func(tool string, b []mcp.ParamHeader, _ error) {
		s.set(tool, b)
	})
}

// CheckParamHeaders checks the Mcp-Param-* headers of a 2026 tools/call m
// (framing already accepted) against the bindings learned for its tool.
func (p *Policy) CheckParamHeaders(r *http.Request, m mcp.Message) error {
	s := p.params
	if s == nil || s.n.Load() == 0 || m.Method != mcp.MethodToolsCall {
		return nil
	}
	name, _ := mcp.ToolCallName(m)
	return mcp.CheckParamHeaders(r.Header, m.Params, s.get(name))
}
