package toolpolicy

import (
	"maps"
	"sync"
	"sync/atomic"

	"github.com/mcpi-edge/caddy-mcpi/mcp"
)

// Bounds of the learned annotations. A site (Host) keeps at most
// maxLearnedTools tools: names beyond it, and names longer than
// maxLearnedNameLen, are not learned and get tool_default. All sites
// together keep at most maxLearnedEntries tools; a site's answer that
// needs room evicts whole least recently used sites, so tools/list
// answers under made-up Host headers (a catch-all or wildcard site)
// cannot keep a real site from being learned: an evicted site is learned
// again from its next tools/list answer.
const (
	maxLearnedTools   = 1024
	maxLearnedEntries = 4 * maxLearnedTools
	maxLearnedNameLen = 128
)

// learnedStore holds the learned tools per site, bounded as above.
type learnedStore struct {
	mu    sync.RWMutex
	hosts map[string]*learnedHost
	n     int // tools over all hosts

	// clock orders uses: each learn or lookup of a site stamps it with
	// the next tick; the least recently used site has the smallest.
	clock atomic.Uint64
}

type learnedHost struct {
	tools map[string]learnedTool
	used  atomic.Uint64
}

// learnedTool is what the upstream's tools/list said of a tool: its class,
// and its annotations for the rules' tool.annotations
// (mcp.EachListedToolHints).
type learnedTool struct {
	class mcp.ToolClass
	hints map[string]any
}

func newLearnedStore() *learnedStore {
	return &learnedStore{hosts: make(map[string]*learnedHost)}
}

func (s *learnedStore) touch(h *learnedHost) { h.used.Store(s.clock.Add(1)) }

// get returns what was learned of tool at host (the zero value when
// nothing) and marks host used.
func (s *learnedStore) get(host, tool string) learnedTool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	h := s.hosts[host]
	if h == nil {
		return learnedTool{}
	}
	s.touch(h)
	return h.tools[tool]
}

// learn records the class of tool at host. A known tool's class is
// updated (the upstream may change it); ToolClassUnknown forgets it. A new
// tool is not learned when its site already holds maxLearnedTools; when
// all sites together are full, the least recently used other sites are
// evicted to make room.
func (s *learnedStore) learn(host, tool string, class mcp.ToolClass, hints map[string]any) {
	if tool == "" || len(tool) > maxLearnedNameLen {
		return
	}
	s.mu.RLock()
	h := s.hosts[host]
	var old learnedTool
	var known bool
	if h != nil {
		s.touch(h)
		old, known = h.tools[tool]
	}
	s.mu.RUnlock()
	if (known && old.class == class && maps.Equal(old.hints, hints)) || (!known && class == mcp.ToolClassUnknown) {
		return
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	h = s.hosts[host]
	if class == mcp.ToolClassUnknown {
		if h != nil {
			if _, known := h.tools[tool]; known {
				delete(h.tools, tool)
				s.n--
				if len(h.tools) == 0 {
					delete(s.hosts, host)
				}
			}
		}
		return
	}
	if h == nil {
		h = &learnedHost{tools: make(map[string]learnedTool)}
		s.hosts[host] = h
	}
	s.touch(h)
	if _, known := h.tools[tool]; !known {
		if len(h.tools) >= maxLearnedTools {
			return
		}
		for s.n >= maxLearnedEntries {
			if !s.evictOldest(h) {
				return
			}
		}
		s.n++
	}
	h.tools[tool] = learnedTool{class: class, hints: hints}
}

// evictOldest drops the least recently used site other than keep, and
// reports whether there was one. The caller holds the write lock. Since
// keep holds fewer than maxLearnedTools of the maxLearnedEntries, another
// site always holds tools when the store is full.
func (s *learnedStore) evictOldest(keep *learnedHost) bool {
	var oldest string
	var at uint64
	found := false
	for name, h := range s.hosts {
		if h == keep {
			continue
		}
		if u := h.used.Load(); !found || u < at {
			oldest, at, found = name, u, true
		}
	}
	if !found {
		return false
	}
	s.n -= len(s.hosts[oldest].tools)
	delete(s.hosts, oldest)
	return true
}

// size returns the number of sites and of tools kept.
func (s *learnedStore) size() (hosts, tools int) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.hosts), s.n
}
