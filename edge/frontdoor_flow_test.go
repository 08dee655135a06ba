package edge_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestFrontDoorFlow: a client with no credential follows the MCP
// authorization flow through the edge alone (401, RFC 9728, RFC 8414,
// registration, consent as the signed-in user, code exchange) and the
// credential it gets is admitted like any other: tools/list and a
// tools/call reach the upstream as the user's DID delegating to the
// client's agent DID.
func TestFrontDoorFlow(t *testing.T) {
	f := newFrontDoor(t, nil, nil)

	// 1. No credential: 401 naming the per-path resource metadata.
	res, _ := f.call("", "", listBody, nil)
	if res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no credential: %d", res.StatusCode)
	}
	wantRM := f.srv.URL + "/.well-known/oauth-protected-resource/mcp"
	if got := res.Header.Get("WWW-Authenticate"); !strings.Contains(got, `resource_metadata="`+wantRM+`"`) {
		t.Fatalf("WWW-Authenticate %q does not name %s", got, wantRM)
	}

	// 2. RFC 9728: the edge is the authorization server; resource = URL.
	res, body := f.get("/.well-known/oauth-protected-resource/mcp", false)
	var prm struct {
		Resource             string   `json:"resource"`
		AuthorizationServers []string `json:"authorization_servers"`
		ScopesSupported      []string `json:"scopes_supported"`
	}
	if err := json.Unmarshal(body, &prm); err != nil || res.StatusCode != 200 {
		t.Fatalf("RFC 9728: %d %s", res.StatusCode, body)
	}
	if prm.Resource != f.srv.URL+"/mcp" || len(prm.AuthorizationServers) != 1 || prm.AuthorizationServers[0] != f.srv.URL ||
		strings.Join(prm.ScopesSupported, " ") != "echo:execute files:read" {
		t.Fatalf("RFC 9728 document: %s", body)
	}

	// 3. RFC 8414 metadata, at the paths clients probe.
	for _, p := range []string{"/.well-known/oauth-authorization-server", "/.well-known/openid-configuration",
		"/.well-known/oauth-authorization-server/mcp", "/mcp/.well-known/openid-configuration"} {
		res, body := f.get(p, false)
		var md map[string]any
		if err := json.Unmarshal(body, &md); err != nil || res.StatusCode != 200 {
			t.Fatalf("%s: %d %s", p, res.StatusCode, body)
		}
		if md["issuer"] != f.srv.URL || md["token_endpoint"] != f.srv.URL+"/oauth/token" ||
			md["registration_endpoint"] != f.srv.URL+"/oauth/register" ||
			md["authorization_response_iss_parameter_supported"] != true ||
			md["client_id_metadata_document_supported"] != true {
			t.Fatalf("%s: %s", p, body)
		}
		if m, _ := json.Marshal(md["code_challenge_methods_supported"]); string(m) != `["S256"]` {
			t.Fatalf("code_challenge_methods_supported %s", m)
		}
	}

	// 4. Registration, consent, code exchange.
	redirect := "http://127.0.0.1:33418/callback"
	id := f.register(redirect)
	verifier, challenge := pkce()
	q := f.authzQuery(id, redirect, challenge, "")
	res, body = f.get("/oauth/authorize?"+q.Encode(), true)
	page := string(body)
	for _, want := range []string{"Test Agent", "not verified", "127.0.0.1:33418", "did:key:", f.srv.URL + "/mcp",
		`name="scope" value="echo:execute" checked`, "<code>echo</code>", `name="approve"`, `name="deny"`, `name="csrf"`, "1 hour", "30 days"} {
		if !strings.Contains(page, want) {
			t.Errorf("consent page lacks %q", want)
		}
	}
	csp := res.Header.Get("Content-Security-Policy")
	if !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "frame-ancestors 'none'") || res.Header.Get("X-Frame-Options") != "DENY" {
		t.Errorf("consent page headers: CSP %q, XFO %q", csp, res.Header.Get("X-Frame-Options"))
	}
	loc := f.approve(f.consentForm(q), "echo:execute", "files:read")
	if loc.Query().Get("state") != "st-123" || loc.Query().Get("iss") != f.srv.URL || loc.Query().Get("code") == "" {
		t.Fatalf("redirect %s", loc)
	}
	status, tok := f.token(url.Values{"grant_type": {"authorization_code"}, "code": {loc.Query().Get("code")},
		"client_id": {id}, "redirect_uri": {redirect}, "code_verifier": {verifier}}, nil)
	if status != 200 || tok.TokenType != "Bearer" || tok.RefreshToken == "" || tok.ExpiresIn < 3500 || tok.Scope != "echo:execute files:read" {
		t.Fatalf("token: %d %+v", status, tok)
	}

	// 5. The credential is admitted; the upstream sees who is calling.
	for _, b := range []string{listBody, echoCall} {
		res, body := f.call(tok.AccessToken, "Bearer", b, nil)
		if res.StatusCode != 200 || !strings.Contains(string(body), `"result"`) {
			t.Fatalf("%s: %d %s", b, res.StatusCode, body)
		}
	}
	d := f.lastAdmitted()
	host := strings.ReplaceAll(strings.TrimPrefix(f.srv.URL, "http://"), ":", "%3A")
	if d == nil || !strings.HasPrefix(d.UserDID, "did:web:"+host+":oauth:users:") || !strings.HasPrefix(d.AgentDID, "did:key:") ||
		strings.Contains(d.UserDID, "alice") {
		t.Fatalf("admitted as %+v", d)
	}

	// 6. Anyone can resolve the user's DID document.
	id22 := d.UserDID[strings.LastIndexByte(d.UserDID, ':')+1:]
	res, body = f.get("/oauth/users/"+id22+"/did.json", false)
	if res.StatusCode != 200 || !strings.Contains(string(body), `"id":"`+d.UserDID+`"`) {
		t.Fatalf("did.json: %d %s", res.StatusCode, body)
	}

	// 7. The same client gets the same agent DID; another client another.
	_, tok2 := f.flow("echo:execute")
	f.call(tok2.AccessToken, "Bearer", listBody, nil)
	if other := f.lastAdmitted(); other.AgentDID == d.AgentDID || other.UserDID != d.UserDID {
		t.Fatalf("second client: agent %s (first %s), user %s", other.AgentDID, d.AgentDID, other.UserDID)
	}
}
