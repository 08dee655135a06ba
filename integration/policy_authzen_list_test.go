package integration

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpi-edge/caddy-mcpi/didresolver"
	"github.com/mcpi-edge/caddy-mcpi/integration/mcpserver"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// startListPolicyEdge runs the policy tools on the Go SDK's stateless
// handler (both eras), with lists the SDK marks cacheable by anyone, behind
// Caddy with policy.
func startListPolicyEdge(t *testing.T, policy string) *harness {
	t.Helper()
	s := mcpserver.New(mcpserver.Options{CountInterval: countInterval, CacheTTL: time.Minute})
	mcpserver.AddPolicyTools(s)
	mux := http.NewServeMux()
	mux.Handle(mcpserver.Path, mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s },
		&mcp.StreamableHTTPOptions{Stateless: true}))
	return startPolicyEdge(t, mux, policy)
}

// TestAuthZENListSDK: through the real Caddy binary, with the Go SDK
// client in the 2026 era, the AuthZEN PDP filters tools/list, asked once
// per list on its Access Evaluations endpoint: it hides whoami from one
// agent and shows it to another, the list is private, and the call of the
// hidden tool is refused too. A list filtered by rules alone is private as
// well.
func TestAuthZENListSDK(t *testing.T) {
	var batches, singles atomic.Int32
	var hidden atomic.Value // the agent DID whoami is hidden from
	hidden.Store("")
	decide := func(agent, tool string) bool { return !(tool == "whoami" && agent == hidden.Load().(string)) }
	pdp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var req struct {
			Subject     struct{ ID string }
			Action      struct{ Name string }
			Resource    struct{ ID string }
			Evaluations []struct{ Resource struct{ ID string } }
		}
		if err := json.Unmarshal(b, &req); err != nil {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/access/v1/evaluations":
			batches.Add(1)
			if req.Action.Name != "tools/list" {
				t.Errorf("a batch for %q, want tools/list", req.Action.Name)
			}
			var out []string
			for _, e := range req.Evaluations {
				out = append(out, fmt.Sprintf(`{"decision":%t}`, decide(req.Subject.ID, e.Resource.ID)))
			}
			_, _ = io.WriteString(w, `{"evaluations":[`+strings.Join(out, ",")+`]}`)
		default:
			singles.Add(1)
			_, _ = fmt.Fprintf(w, `{"decision":%t}`, decide(req.Subject.ID, req.Resource.ID))
		}
	}))
	t.Cleanup(pdp.Close)
	h := startListPolicyEdge(t, "rule no_links `!tool.name.startsWith('link_')` \"Links are off on this route.\"\n"+
		fmt.Sprintf("\t\tauthzen %s {\n\t\t\tallow_private\n\t\t}", pdp.URL))
	w := newWorld(t, h)
	other := newParty(t, didresolver.Ed25519)
	hidden.Store(w.agent.did)
	ctx := testContext(t)
	list := func(hdr http.Header) *mcp.ListToolsResult {
		t.Helper()
		cs := h.mustConnect(ctx, mcpserver.Path, hdr, modernProtocol, nil)
		before := batches.Load()
		tools, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if n := batches.Load() - before; n != 1 {
			t.Errorf("the PDP got %d batch requests for one list, want 1", n)
		}
		if tools.CacheScope != "private" {
			t.Errorf("a list the PDP filtered has cacheScope %q, want private", tools.CacheScope)
		}
		return tools
	}
	agentA := http.Header{"Authorization": {"Bearer " + w.jwt(t)}}
	agentB := http.Header{"Authorization": {"Bearer " + w.jwt(t, func(tm *vc.Template) { tm.AgentDID = other.did })}}
	got := listedTools(list(agentA))
	if slices.Contains(got, "whoami") || !slices.Contains(got, "greet") || slices.ContainsFunc(got, func(s string) bool { return strings.HasPrefix(s, "link_") }) {
		t.Errorf("agent A lists %v, want greet without whoami or link_*", got)
	}
	if got := listedTools(list(agentB)); !slices.Contains(got, "whoami") {
		t.Errorf("agent B lists %v, want whoami", got)
	}
	if n := singles.Load(); n != 0 {
		t.Errorf("the PDP got %d single evaluations for lists, want none (the batch endpoint)", n)
	}
	h.upstream.Reset()
	cs := h.mustConnect(ctx, mcpserver.Path, agentA, modernProtocol, nil)
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "whoami"})
	if sc, _ := res.StructuredContent.(map[string]any); err != nil || !res.IsError || sc["rule"] != "authzen" {
		t.Errorf("agent A called whoami: %v %+v", err, res)
	}
	if called := calledTools(h.upstream.Requests()); len(called) != 0 {
		t.Errorf("upstream ran %v, want nothing", called)
	}

	t.Run("rules alone", func(t *testing.T) {
		h := startListPolicyEdge(t, "rule no_links `!tool.name.startsWith('link_')` \"Links are off on this route.\"")
		w := newWorld(t, h)
		cs := h.mustConnect(ctx, mcpserver.Path, http.Header{"Authorization": {"Bearer " + w.jwt(t)}}, modernProtocol, nil)
		tools, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := listedTools(tools); slices.ContainsFunc(got, func(s string) bool { return strings.HasPrefix(s, "link_") }) || tools.CacheScope != "private" {
			t.Errorf("a rule-filtered list: %v, cacheScope %q; want no link_* and private", got, tools.CacheScope)
		}
	})
}
