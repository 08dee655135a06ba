package toolpolicy

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/mcpi-edge/caddy-mcpi/mcp"
)

// TestParamHeaderStoreBounds: the learned set stops growing at its bounds
// without evicting what it holds, and a known tool can still be updated and
// forgotten.
func TestParamHeaderStoreBounds(t *testing.T) {
	s := newParamHeaderStore()
	b := []mcp.ParamHeader{{Path: []string{"region"}, Header: "Mcp-Param-Region"}}
	for i := range maxParamHeaderTools + 10 {
		s.set(fmt.Sprintf("tool%d", i), b)
	}
	if n := len(s.m); n != maxParamHeaderTools || int(s.n.Load()) != n {
		t.Fatalf("entries: %d (counter %d), want %d", n, s.n.Load(), maxParamHeaderTools)
	}
	if s.get(fmt.Sprintf("tool%d", maxParamHeaderTools)) != nil {
		t.Fatal("a tool beyond the bound was learned")
	}
	if s.get("tool0") == nil {
		t.Fatal("a tool learned first was evicted")
	}
	b2 := []mcp.ParamHeader{{Path: []string{"zone"}, Header: "Mcp-Param-Zone"}}
	if s.set("tool0", b2); !slices.EqualFunc(s.get("tool0"), b2, sameBinding) {
		t.Fatal("a known tool was not replaced when full")
	}
	s.set("tool0", nil)
	if s.get("tool0") != nil || len(s.m) != maxParamHeaderTools-1 {
		t.Fatal("tool0 not forgotten")
	}

	// Bytes: few tools with large names fill the byte bound first.
	s = newParamHeaderStore()
	big := []mcp.ParamHeader{{Path: []string{strings.Repeat("p", 60<<10)}, Header: "Mcp-Param-P"}}
	for i := range 10 {
		s.set(fmt.Sprintf("t%d", i), big)
	}
	if s.bytes > maxParamHeaderBytes || len(s.m) != maxParamHeaderBytes/(60<<10) {
		t.Fatalf("bytes %d over %d, or %d entries", s.bytes, maxParamHeaderBytes, len(s.m))
	}
	s.set("t0", nil)
	s.set("t9", big)
	if s.get("t9") == nil {
		t.Fatal("room made by forgetting a tool not reused")
	}
}
