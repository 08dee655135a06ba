package toolpolicy

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/mcpi-edge/caddy-mcpi/mcp"
)

// testHost is the site the learned classes are kept under.
const testHost = "mcp.example.com"

func TestToolAnnotationsBounded(t *testing.T) {
	a := newAnnotationPolicy(&ToolAnnotationsPolicy{ReadOnly: []string{"r"}}, false)
	for i := range maxLearnedTools + 500 {
		a.learn(testHost, fmt.Sprintf("tool%d", i), mcp.ToolClassReadOnly, nil)
	}
	if _, n := a.learned.size(); n != maxLearnedTools {
		t.Fatalf("learned %d tools, want the cap %d", n, maxLearnedTools)
	}
	beyond := fmt.Sprintf("tool%d", maxLearnedTools)
	if _, ok := a.decide(testHost, beyond, []string{"r"}); ok {
		t.Error("a tool beyond the cap got a class decision instead of tool_default")
	}
	if d, ok := a.decide(testHost, "tool0", []string{"r"}); !ok || !d.Allowed {
		t.Errorf("tool0: %+v %t", d, ok)
	}
	// Known tools still update when full; forgetting makes room.
	a.learn(testHost, "tool0", mcp.ToolClassDestructive, nil)
	if c := a.class(testHost, "tool0"); c != mcp.ToolClassDestructive {
		t.Errorf("tool0 class %v after update", c)
	}
	a.learn(testHost, "tool1", mcp.ToolClassUnknown, nil)
	a.learn(testHost, beyond, mcp.ToolClassReadOnly, nil)
	if a.class(testHost, "tool1") != mcp.ToolClassUnknown || a.class(testHost, beyond) != mcp.ToolClassReadOnly || learnedTools(a) != maxLearnedTools {
		t.Errorf("forget and relearn: %v %v %d", a.class(testHost, "tool1"), a.class(testHost, beyond), learnedTools(a))
	}
	// Over-long names are not learned.
	long := strings.Repeat("x", maxLearnedNameLen+1)
	a.learn(testHost, long, mcp.ToolClassReadOnly, nil)
	if a.class(testHost, long) != mcp.ToolClassUnknown {
		t.Error("over-long name learned")
	}
	// A class without scopes falls back to tool_default.
	a.learn(testHost, "tool2", mcp.ToolClassOther, nil)
	if _, ok := a.decide(testHost, "tool2", nil); ok {
		t.Error("class without scopes decided")
	}
	var nilPolicy *annotationPolicy
	if _, ok := nilPolicy.decide(testHost, "tool0", nil); ok {
		t.Error("feature off but decided")
	}
}

func learnedTools(a *annotationPolicy) int {
	_, n := a.learned.size()
	return n
}

// TestToolAnnotationsConcurrent is for the race detector.
func TestToolAnnotationsConcurrent(t *testing.T) {
	a := newAnnotationPolicy(&ToolAnnotationsPolicy{Destructive: []string{"w"}}, false)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				name := fmt.Sprintf("t%d", (g*7+i)%50)
				a.learn(testHost, name, mcp.ToolClass(1+i%3), nil)
				a.decide(testHost, name, []string{"w"})
			}
		}()
	}
	wg.Wait()
}

// TestAnnotationsPolicyTurnsDefaultToDeny: with an annotations policy, a
// tool the edge has not seen is not allowed unless tool_default says so.
func TestAnnotationsPolicyTurnsDefaultToDeny(t *testing.T) {
	c := PolicyConfig{ToolAnnotationsPolicy: &ToolAnnotationsPolicy{ReadOnly: []string{"r"}}}
	p, err := c.policy()
	if err != nil || p == nil || p.Default != mcp.DefaultDeny {
		t.Fatalf("policy %+v %v: an unseen tool must not be allowed", p, err)
	}
	c.ToolDefault = "allow"
	if p, _ := c.policy(); p == nil || p.Default != mcp.DefaultAllow {
		t.Fatalf("explicit tool_default allow lost: %+v", p)
	}
}
