package toolpolicy

import (
	"fmt"
	"testing"

	"github.com/mcpi-edge/caddy-mcpi/mcp"
)

// TestLearnedStoreEvictsLeastRecentlyUsedSites: sites filling the store
// never keep a new site from being learned; the sites evicted are the
// least recently used ones, whole, and a site in use is kept.
func TestLearnedStoreEvictsLeastRecentlyUsedSites(t *testing.T) {
	s := newLearnedStore()
	fill := func(host string, tools int) {
		for i := range tools {
			s.learn(host, fmt.Sprintf("t%d", i), mcp.ToolClassReadOnly, nil)
		}
	}
	fill("victim", 10)
	fill("busy", 10)
	// 8 tools per made-up site, as many sites as fill the store twice.
	for i := range 2 * maxLearnedEntries / 8 {
		fill(fmt.Sprintf("junk%d.example", i), 8)
		s.get("busy", "t0") // busy is in use all along
	}
	hosts, tools := s.size()
	if tools > maxLearnedEntries {
		t.Fatalf("%d tools kept, over the bound %d", tools, maxLearnedEntries)
	}
	if hosts > maxLearnedEntries/8+1 {
		t.Fatalf("%d sites kept", hosts)
	}
	if s.get("victim", "t0").class != mcp.ToolClassUnknown {
		t.Error("the least recently used site was kept")
	}
	for i := range 10 {
		if c := s.get("busy", fmt.Sprintf("t%d", i)).class; c != mcp.ToolClassReadOnly {
			t.Fatalf("a site in use lost tool t%d: %v", i, c)
		}
	}
	// The full store still learns a new answer, evicting to make room.
	fill("victim", 10)
	for i := range 10 {
		if c := s.get("victim", fmt.Sprintf("t%d", i)).class; c != mcp.ToolClassReadOnly {
			t.Fatalf("victim not relearned into the full store: t%d %v", i, c)
		}
	}
	if _, tools := s.size(); tools > maxLearnedEntries {
		t.Fatalf("%d tools kept after relearning", tools)
	}
	// A site at its own bound while the store is full learns no more,
	// and evicts nobody for it.
	fill("big", maxLearnedTools+1)
	if s.get("big", fmt.Sprintf("t%d", maxLearnedTools)).class != mcp.ToolClassUnknown {
		t.Error("a site kept more than maxLearnedTools")
	}
	if s.get("big", "t0").class != mcp.ToolClassReadOnly || s.get("victim", "t0").class != mcp.ToolClassReadOnly {
		t.Error("recently used sites evicted")
	}
	// Forgetting every tool of a site drops the site.
	before, _ := s.size()
	for i := range 10 {
		s.learn("victim", fmt.Sprintf("t%d", i), mcp.ToolClassUnknown, nil)
	}
	if after, _ := s.size(); after != before-1 {
		t.Errorf("sites %d -> %d after forgetting one whole", before, after)
	}
}
