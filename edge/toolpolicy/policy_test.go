package toolpolicy

import (
	"context"
	"testing"

	"go.uber.org/zap"

	"github.com/mcpi-edge/caddy-mcpi/edge/site"
)

// TestToolLabel: a tool is its own log and metric label when the policy
// names it or the upstream listed it; any other name is "other", so a
// caller cannot grow the labels.
func TestToolLabel(t *testing.T) {
	p, err := New(context.Background(), &PolicyConfig{Tools: []ToolPolicy{{Name: "echo"}}}, 1<<20, Parts{Site: site.New(nil, nil), Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	c := &responseCheck{p: p, host: "mcp.example.com"}
	c.allow("shell") // the filter asks about each listed tool
	for tool, want := range map[string]string{"echo": "echo", "shell": "shell", "never-listed": "other"} {
		if got := p.toolLabel(tool); got != want {
			t.Errorf("toolLabel(%q) = %q, want %q", tool, got, want)
		}
	}
}
