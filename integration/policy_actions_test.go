package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpi-edge/caddy-mcpi/integration/mcpserver"
)

// routeCase is one route of the handshake-action tests.
type routeCase struct {
	name, prefix string
	enforce      bool
}

var actionRoutes = []routeCase{{"enforce", "", true}, {"observe", "/observe", false}}

// TestPolicyPhishingAuthURL: a tool result whose auth_required authUrl
// points to a look-alike host of another domain, or to the right domain over
// plain http, is replaced by a tool error in enforce mode (the URL never
// reaches the client) and passes unchanged in observe mode. An https authUrl
// on the endpoint's own registrable domain passes both, tagged with
// context_did. The upstream runs every call either way: the check is on the
// way back.
func TestPolicyPhishingAuthURL(t *testing.T) {
	m := newPolicyRoutesHarness(t)
	w := m.world(t)
	auth := http.Header{"Authorization": {"Bearer " + w.jwt(t)}}
	phish := []struct {
		tool, url, issue string
	}{
		{"phish_lookalike", mcpserver.PhishLookalikeURL, "foreign_host authUrl"},
		{"phish_http", mcpserver.PhishHTTPURL, "insecure_url authUrl"},
	}
	valid := mcpserver.SameDomainAuthURL + "&context_did=" + url.QueryEscape(w.user.did)

	for _, rc := range actionRoutes {
		for _, path := range []string{mcpserver.Path, policyJSONPath} {
			t.Run(rc.name+"/"+strings.TrimPrefix(path, "/"), func(t *testing.T) {
				ctx := testContext(t)
				cs := m.connect(ctx, t, rc.prefix+path, auth, legacyProtocol, nil)
				m.upstream.Reset()

				for _, p := range phish {
					res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: p.tool})
					if err != nil {
						t.Fatalf("%s: %v", p.tool, err)
					}
					if !rc.enforce {
						if res.IsError {
							t.Errorf("%s: isError in observe mode: %+v", p.tool, res)
						}
						want := map[string]any{"_action": "auth_required", "provider": "example", "authUrl": p.url}
						if a := handshakeAction(res); !sameJSON(t, a, want) {
							t.Errorf("%s: handshakeAction %v, want it unchanged: %v", p.tool, a, want)
						}
						if text, _ := res.Content[0].(*mcp.TextContent); text == nil || text.Text != mcpserver.LinkText {
							t.Errorf("%s: content %#v, want the tool's own", p.tool, res.Content[0])
						}
						continue
					}
					if got := rejectedIssues(t, res); !slices.Equal(got, []string{p.issue}) {
						t.Errorf("%s: issues %v, want [%s]", p.tool, got, p.issue)
					}
					// Neither the URL nor its query (state) may reach the
					// model, in any field.
					out, _ := json.Marshal(res)
					base, _, _ := strings.Cut(p.url, "?")
					if bytes.Contains(out, []byte(base)) || bytes.Contains(out, []byte("state=p")) {
						t.Errorf("%s: the authUrl reached the client: %s", p.tool, out)
					}
				}

				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "link_same_domain"})
				if err != nil || res.IsError {
					t.Fatalf("link_same_domain: %v %+v", err, res)
				}
				if got := handshakeAction(res)["authUrl"]; got != valid {
					t.Errorf("link_same_domain: authUrl %v, want %s", got, valid)
				}

				want := []string{"phish_lookalike", "phish_http", "link_same_domain"}
				if got := upstreamToolCalls(m.upstream.Requests()); !slices.Equal(got, want) {
					t.Errorf("upstream ran %v, want %v", got, want)
				}
			})
		}
	}

	// The same on the wire: HTTP 200 with the rewritten JSON-RPC result.
	for _, rc := range actionRoutes {
		t.Run("raw/"+rc.name, func(t *testing.T) {
			ctx := testContext(t)
			path := rc.prefix + policyJSONPath
			session := m.initSession(ctx, t, path, auth, legacyProtocol)
			m.upstream.Reset()
			resp := m.rawJSON(ctx, path, auth, session, legacyProtocol, toolCall(7, "phish_http", nil))
			if resp.Status != http.StatusOK {
				t.Fatalf("HTTP %d %s", resp.Status, resp.Body)
			}
			if ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); ct != "application/json" {
				t.Errorf("Content-Type %q", resp.Header.Get("Content-Type"))
			}
			if cl := resp.Header.Get("Content-Length"); cl != strconv.Itoa(len(resp.Body)) {
				t.Errorf("Content-Length %q for a %d-byte body", cl, len(resp.Body))
			}
			res := resp.result(t, 7)
			sc, _ := res["structuredContent"].(map[string]any)
			if rc.enforce {
				if res["isError"] != true || sc["error"] != "handshake_action_rejected" || rawAction(res) != nil {
					t.Errorf("enforce: %s, want the handshake_action_rejected tool error", resp.Body)
				}
			} else {
				a, _ := rawAction(res).(map[string]any)
				if res["isError"] == true || a["authUrl"] != mcpserver.PhishHTTPURL {
					t.Errorf("observe: %s, want the result unchanged", resp.Body)
				}
			}
			if got := upstreamToolCalls(m.upstream.Requests()); !slices.Equal(got, []string{"phish_http"}) {
				t.Errorf("upstream ran %v, want [phish_http]", got)
			}
		})
	}
}

// TestPolicyPhishingAuthURLBatch: the phishing checks apply to every
// result of a forwarded batch (2025-03-26 session), in SSE events and in a
// JSON array: in enforce mode the phishing results are replaced and the
// valid one kept, in observe mode all pass.
func TestPolicyPhishingAuthURLBatch(t *testing.T) {
	m := newPolicyRoutesHarness(t)
	w := m.world(t)
	auth := http.Header{"Authorization": {"Bearer " + w.jwt(t)}}
	valid := mcpserver.SameDomainAuthURL + "&context_did=" + url.QueryEscape(w.user.did)
	for _, rc := range actionRoutes {
		for _, path := range []string{mcpserver.Path, policyJSONPath} {
			t.Run(rc.name+"/"+strings.TrimPrefix(path, "/"), func(t *testing.T) {
				ctx := testContext(t)
				path := rc.prefix + path
				session := m.initSession(ctx, t, path, auth, pmBatchProtocol)
				m.upstream.Reset()
				resp := m.rawJSON(ctx, path, auth, session, pmBatchProtocol, []any{
					toolCall(31, "phish_lookalike", nil),
					toolCall(32, "link_same_domain", nil),
					toolCall(33, "phish_http", nil),
				})
				if resp.Status != http.StatusOK {
					t.Fatalf("HTTP %d %s", resp.Status, resp.Body)
				}
				for id, u := range map[int]string{31: mcpserver.PhishLookalikeURL, 33: mcpserver.PhishHTTPURL} {
					res := resp.result(t, id)
					a, _ := rawAction(res).(map[string]any)
					sc, _ := res["structuredContent"].(map[string]any)
					if rc.enforce && (res["isError"] != true || sc["error"] != "handshake_action_rejected" || a != nil) {
						t.Errorf("id %d: %v, want the handshake_action_rejected tool error", id, res)
					}
					if !rc.enforce && (res["isError"] == true || a["authUrl"] != u) {
						t.Errorf("id %d: %v, want it unchanged", id, res)
					}
				}
				if rc.enforce {
					for _, u := range []string{mcpserver.PhishLookalikeURL, mcpserver.PhishHTTPURL} {
						if base, _, _ := strings.Cut(u, "?"); bytes.Contains(resp.Body, []byte(base)) {
							t.Errorf("%s reached the client: %s", base, resp.Body)
						}
					}
				}
				res := resp.result(t, 32)
				if a, _ := rawAction(res).(map[string]any); res["isError"] == true || a["authUrl"] != valid {
					t.Errorf("id 32: %v, want authUrl %s", res, valid)
				}
				want := []string{"phish_lookalike", "link_same_domain", "phish_http"}
				if got := upstreamToolCalls(m.upstream.Requests()); !slices.Equal(got, want) {
					t.Errorf("upstream ran %v, want %v", got, want)
				}
			})
		}
	}
}

// TestPolicyPhishingAuthURLStreamed: a phishing result that ends an SSE
// stream of progress notifications is replaced in enforce mode and passed in
// observe mode, and the notifications before it still arrive, in order.
func TestPolicyPhishingAuthURLStreamed(t *testing.T) {
	m := newPolicyRoutesHarness(t)
	w := m.world(t)
	auth := http.Header{"Authorization": {"Bearer " + w.jwt(t)}}
	for _, rc := range actionRoutes {
		t.Run(rc.name, func(t *testing.T) {
			ctx := testContext(t)
			path := rc.prefix + mcpserver.Path
			progressc := make(chan float64, 2*mcpserver.StreamedProgress)
			opts := &mcp.ClientOptions{ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
				progressc <- req.Params.Progress
			}}
			cs := m.connect(ctx, t, path, auth, legacyProtocol, opts)
			m.upstream.Reset()
			params := &mcp.CallToolParams{Name: "phish_streamed"}
			params.SetProgressToken("p1")
			res, err := cs.CallTool(ctx, params)
			if err != nil {
				t.Fatalf("phish_streamed: %v", err)
			}
			if rc.enforce {
				if got := rejectedIssues(t, res); !slices.Equal(got, []string{"foreign_host authUrl"}) {
					t.Errorf("issues %v, want [foreign_host authUrl]", got)
				}
			} else if a := handshakeAction(res); res.IsError || a["authUrl"] != mcpserver.PhishLookalikeURL {
				t.Errorf("isError=%t handshakeAction %v, want it unchanged", res.IsError, a)
			}
			// The SDK client runs notification handlers asynchronously.
			for i := 1; i <= mcpserver.StreamedProgress; i++ {
				select {
				case p := <-progressc:
					if p != float64(i) {
						t.Errorf("progress %v, want %d", p, i)
					}
				case <-time.After(5 * time.Second):
					t.Fatalf("%d progress notification(s), want %d", i-1, mcpserver.StreamedProgress)
				}
			}
			if got := upstreamToolCalls(m.upstream.Requests()); !slices.Equal(got, []string{"phish_streamed"}) {
				t.Errorf("upstream ran %v, want [phish_streamed]", got)
			}

			// On the wire: one SSE stream, the notifications, then the
			// (checked) result.
			session := m.initSession(ctx, t, path, auth, legacyProtocol)
			msg := toolCall(5, "phish_streamed", nil)
			msg["params"].(map[string]any)["_meta"] = map[string]any{"progressToken": "p2"}
			resp := m.rawJSON(ctx, path, auth, session, legacyProtocol, msg)
			if ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); resp.Status != http.StatusOK || ct != "text/event-stream" {
				t.Fatalf("HTTP %d Content-Type %q, want 200 text/event-stream", resp.Status, resp.Header.Get("Content-Type"))
			}
			var kinds []string
			for _, msg := range resp.Msgs {
				kind := fmt.Sprint(msg["method"])
				if msg["result"] != nil {
					kind = "result"
				}
				kinds = append(kinds, kind)
			}
			if want := []string{"notifications/progress", "notifications/progress", "result"}; !slices.Equal(kinds, want) {
				t.Fatalf("events %v, want %v: %s", kinds, want, resp.Body)
			}
			result := resp.result(t, 5)
			a, _ := rawAction(result).(map[string]any)
			if rc.enforce && (result["isError"] != true || a != nil) {
				t.Errorf("result %v, want the handshake_action_rejected tool error", result)
			}
			if !rc.enforce && a["authUrl"] != mcpserver.PhishLookalikeURL {
				t.Errorf("result %v, want it unchanged", result)
			}
		})
	}
}

// TestPolicyMalformedAction: handshake actions a client could not act
// on safely (signature_request without types, an unknown _action, a
// transaction_proposal to a short address, a handshakeAction that is not an
// object) are replaced by a tool error naming the issue in enforce mode, and
// pass unchanged in observe mode.
func TestPolicyMalformedAction(t *testing.T) {
	m := newPolicyRoutesHarness(t)
	w := m.world(t)
	auth := http.Header{"Authorization": {"Bearer " + w.jwt(t)}}
	cases := []struct {
		tool, issue string
	}{
		{"action_sig_no_types", "malformed types"},
		{"action_unknown", "unknown_action _action"},
		{"action_tx_bad_to", "malformed to"},
		{"action_not_object", "malformed structuredContent._meta.handshakeAction"},
	}

	for _, rc := range actionRoutes {
		for _, path := range []string{mcpserver.Path, policyJSONPath} {
			t.Run(rc.name+"/"+strings.TrimPrefix(path, "/"), func(t *testing.T) {
				ctx := testContext(t)
				cs := m.connect(ctx, t, rc.prefix+path, auth, legacyProtocol, nil)
				m.upstream.Reset()
				var want []string
				for _, c := range cases {
					want = append(want, c.tool)
					res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: c.tool})
					if err != nil {
						t.Fatalf("%s: %v", c.tool, err)
					}
					if rc.enforce {
						if got := rejectedIssues(t, res); !slices.Equal(got, []string{c.issue}) {
							t.Errorf("%s: issues %v, want [%s]", c.tool, got, c.issue)
						}
						continue
					}
					sc, _ := res.StructuredContent.(map[string]any)
					meta, _ := sc["_meta"].(map[string]any)
					if res.IsError || !sameJSON(t, meta["handshakeAction"], mcpserver.MalformedActions[c.tool]) {
						t.Errorf("%s: isError=%t handshakeAction %v, want it unchanged in observe mode", c.tool, res.IsError, meta["handshakeAction"])
					}
				}
				if got := upstreamToolCalls(m.upstream.Requests()); !slices.Equal(got, want) {
					t.Errorf("upstream ran %v, want %v", got, want)
				}
			})
		}
	}
}
