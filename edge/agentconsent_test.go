package edge_test

import (
	"encoding/json"
	"html"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/didresolver"
	"github.com/mcpi-edge/caddy-mcpi/edge"
	"github.com/mcpi-edge/caddy-mcpi/mcp"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// kyaAgent is a KYA-OS agent whose own delegation (echo only) comes from
// an issuer the route trusts beside the front door's users.
type kyaAgent struct {
	did, tok string
}

func newKYAOSFrontDoor(t *testing.T) (*frontDoor, kyaAgent) {
	t.Helper()
	ipriv, _ := didresolver.GenerateKey(didresolver.Ed25519)
	ipub, _ := didresolver.PublicKeyOf(ipriv)
	issuer, ikid, _ := didresolver.KeyDID(ipub)
	apriv, _ := didresolver.GenerateKey(didresolver.Ed25519)
	apub, _ := didresolver.PublicKeyOf(apriv)
	agent, _, _ := didresolver.KeyDID(apub)
	f := newFrontDoor(t, nil, func(c *edge.Config) { c.TrustedIssuers = []string{issuer} })
	u, _ := url.Parse(f.srv.URL)
	tok, err := vc.IssueJWT(ipriv, ikid, vc.Template{
		AgentDID: agent, UserDID: "did:example:someone", Scopes: []string{"echo:execute"},
		Audience: []string{"did:web:" + strings.ReplaceAll(u.Host, ":", "%3A")}, ExpiresAt: time.Now().Add(time.Hour),
	})
	if err != nil {
		t.Fatal(err)
	}
	return f, kyaAgent{did: agent, tok: tok}
}

// call2026 is a 2026 tools/call of files by a client declaring URL-mode
// elicitation, with requestState when not "".
func (f *frontDoor) call2026(tok, state string) (*http.Response, []byte) {
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{"url":{}}}}`
	extra := ""
	if state != "" {
		extra = `,"requestState":` + strconv.Quote(state)
	}
	body := `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"files","arguments":{},` + meta + extra + `}}`
	req, _ := http.NewRequest(http.MethodPost, f.srv.URL+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("MCP-Method", "tools/call")
	req.Header.Set("MCP-Name", "files")
	req.Header.Set("KYA-Delegation", tok)
	return f.do(req)
}

type inputRequiredAnswer struct {
	Result struct {
		ResultType    string `json:"resultType"`
		RequestState  string `json:"requestState"`
		InputRequests map[string]struct {
			Params struct {
				URL string `json:"url"`
			} `json:"params"`
		} `json:"inputRequests"`
	} `json:"result"`
}

// TestAgentConsent2026: a 2026 client's call lacking a scope gets the
// input-required consent naming the edge's own page; after the user
// approves there, the retry with the sealed requestState goes on, once,
// with the approved delegation (the hosted user's, to the same agent).
func TestAgentConsent2026(t *testing.T) {
	f, agent := newKYAOSFrontDoor(t)

	res, body := f.call2026(agent.tok, "")
	var ir inputRequiredAnswer
	if res.StatusCode != http.StatusOK || json.Unmarshal(body, &ir) != nil || ir.Result.ResultType != "input_required" {
		t.Fatalf("want the input-required consent, got %d %s", res.StatusCode, body)
	}
	link := ir.Result.InputRequests[mcp.ConsentInputID].Params.URL
	if !strings.HasPrefix(link, f.srv.URL+"/oauth/authorize?") || ir.Result.RequestState == "" {
		t.Fatalf("consent URL %q, requestState %q: want the edge's own consent page", link, ir.Result.RequestState)
	}

	// Not approved yet: prompted again, nothing forwarded.
	if _, body := f.call2026(agent.tok, ir.Result.RequestState); !strings.Contains(string(body), "input_required") || f.upstreams != 0 {
		t.Fatalf("retry before approval: upstream called %d times; %s", f.upstreams, body)
	}

	// The page: signed in only, and only as the edge made it.
	if res, _ := f.get(strings.TrimPrefix(link, f.srv.URL), false); res.StatusCode != http.StatusUnauthorized {
		t.Errorf("consent page without sign-in: %d, want 401", res.StatusCode)
	}
	forged := strings.Replace(link, "grant=files%3Aread", "grant=files%3Aread+files%3Awrite", 1)
	if res, _ := f.get(strings.TrimPrefix(forged, f.srv.URL), true); res.StatusCode != http.StatusBadRequest || forged == link {
		t.Errorf("altered consent link: %d, want 400", res.StatusCode)
	}
	res, body = f.get(strings.TrimPrefix(link, f.srv.URL), true)
	if res.StatusCode != http.StatusOK || !strings.Contains(string(body), agent.did) ||
		!strings.Contains(res.Header.Get("Content-Security-Policy"), "frame-ancestors 'none'") {
		t.Fatalf("consent page: %d %v\n%s", res.StatusCode, res.Header, body)
	}
	form := url.Values{}
	for _, m := range hiddenRE.FindAllStringSubmatch(string(body), -1) {
		form.Set(m[1], html.UnescapeString(m[2]))
	}
	denied := cloneValues(form)
	denied.Set("deny", "1")
	if res, body := f.postForm("/oauth/authorize?kya_consent=1", denied, true, nil); res.StatusCode != http.StatusOK || !strings.Contains(string(body), "You denied") {
		t.Fatalf("deny: %d %s", res.StatusCode, body)
	}
	if _, body := f.call2026(agent.tok, ir.Result.RequestState); !strings.Contains(string(body), "input_required") || f.upstreams != 0 {
		t.Fatalf("retry after a denial: upstream called %d times; %s", f.upstreams, body)
	}
	form.Set("approve", "1")
	bad := cloneValues(form)
	bad.Set("csrf", form.Get("csrf")+"x")
	if res, _ := f.postForm("/oauth/authorize?kya_consent=1", bad, true, nil); res.StatusCode != http.StatusForbidden {
		t.Errorf("approval with a wrong CSRF token: %d, want 403", res.StatusCode)
	}
	if res, body := f.postForm("/oauth/authorize?kya_consent=1", form, true, nil); res.StatusCode != http.StatusOK || !strings.Contains(string(body), "You allowed the agent") {
		t.Fatalf("approval: %d %s", res.StatusCode, body)
	}

	res, body = f.call2026(agent.tok, ir.Result.RequestState)
	if res.StatusCode != http.StatusOK || f.upstreams != 1 || strings.Contains(string(body), "input_required") {
		t.Fatalf("retry after approval: %d, upstream called %d times\n%s", res.StatusCode, f.upstreams, body)
	}
	d := f.admitted[len(f.admitted)-1]
	if d.AgentDID != agent.did || !strings.Contains(d.UserDID, ":oauth:users:") ||
		!strings.Contains(strings.Join(d.Scopes, " "), "files:read") || !strings.Contains(strings.Join(d.Scopes, " "), "echo:execute") {
		t.Errorf("the upstream's identity: agent %s, user %s, scopes %v; want the agent, the hosted user, echo and files", d.AgentDID, d.UserDID, d.Scopes)
	}

	// The approval admits one retry: the same requestState again is
	// prompted, and the upstream sees nothing more.
	if _, body := f.call2026(agent.tok, ir.Result.RequestState); !strings.Contains(string(body), "input_required") || f.upstreams != 1 {
		t.Fatalf("a second retry with the approved requestState: upstream called %d times; %s", f.upstreams, body)
	}
	// And the link, once approved, makes no second delegation.
	if res, body := f.postForm("/oauth/authorize?kya_consent=1", form, true, nil); res.StatusCode != http.StatusConflict || !strings.Contains(string(body), "already approved") {
		t.Fatalf("the approved form posted again: %d %s", res.StatusCode, body)
	}
	if _, body := f.call2026(agent.tok, ir.Result.RequestState); !strings.Contains(string(body), "input_required") || f.upstreams != 1 {
		t.Fatalf("a retry after the form was posted again: upstream called %d times; %s", f.upstreams, body)
	}
}
