package integration

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// spoofMarker is in every forged value, so "did any forged value reach the
// upstream" is a substring search that no header renaming can dodge.
const spoofMarker = "mallory"

// spoofSet is one way of forging identity headers.
type spoofSet struct {
	name string
	// allowlisted: send to the server whose Caddy options let these
	// underscore/dot names through (expected_underscore_headers,
	// expected_dot_headers). By default Caddy 2.11 drops every header
	// whose name has '_' or '.' before any handler runs, so on the
	// default server those rows test Caddy, and on the allowlisted one
	// they test the mcpi handler's own stripping.
	allowlisted bool
	hdr         http.Header // raw names, sent as written (h1) or lower-cased (h2)
	// publicArrives: what reaches the upstream on the route without mcpi.
	// It is the control of the row: where it is true the forged names
	// demonstrably survive Caddy, so their absence on the mcpi routes is
	// the handler's doing.
	publicArrives bool
}

var spoofSets = []spoofSet{
	{
		name: "odd-case",
		hdr: http.Header{
			"X-AGENT-DID":              {"did:example:mallory"},
			"x-user-did":               {"did:example:mallory-user"},
			"x-AgEnT-rEpUtAtIoN-sCoRe": {"100 mallory"},
			"X-VERIFIED-DELEGATION":    {"mallory"},
			"kya-os-agent-did":         {"did:example:mallory"},
			"KYA-OS-DELEGATION-PROOF":  {"mallory-proof"},
		},
		publicArrives: true,
	},
	{
		// Two fields of one name, and the same name in two spellings:
		// the server merges them into one key with several values.
		name: "duplicated",
		hdr: http.Header{
			"X-Agent-DID":              {"did:example:mallory-1", "did:example:mallory-2"},
			"x-agent-did":              {"did:example:mallory-3"},
			"X-User-DID":               {"did:example:mallory-u1", "did:example:mallory-u2"},
			"X-Verified-Delegation":    {"mallory", "mallory"},
			"X-Agent-Reputation-Score": {"1 mallory", "100 mallory"},
			"KYA-OS-Agent-DID":         {"did:example:mallory-1", "did:example:mallory-2"},
			"Kya-Os-Delegation-Proof":  {"mallory-a", "mallory-b"},
		},
		publicArrives: true,
	},
	{
		name: "underscore/caddy-default",
		hdr:  underscoreSpoof,
		// Caddy drops them (GHSA-f59h-q822-g45g) before any handler.
		publicArrives: false,
	},
	{
		name:          "dot/caddy-default",
		hdr:           dotSpoof,
		publicArrives: false,
	},
	{name: "underscore/allowlisted", allowlisted: true, hdr: underscoreSpoof, publicArrives: true},
	{name: "dot/allowlisted", allowlisted: true, hdr: dotSpoof, publicArrives: true},
}

// underscoreSpoof: CGI, PHP, nginx with underscores_in_headers and some Node
// stacks read X_Agent_DID as X-Agent-DID. Kya_Delegation is the underscore
// spelling of a carrier: never read as one, so it must go too.
var underscoreSpoof = http.Header{
	"X_Agent_DID":              {"did:example:mallory"},
	"x_user_did":               {"did:example:mallory-user"},
	"X_VERIFIED_DELEGATION":    {"mallory"},
	"x_agent_reputation_score": {"100 mallory"},
	"KYA_OS_Agent_DID":         {"did:example:mallory"},
	"kya_os_delegation_proof":  {"mallory-proof"},
	"Kya_Delegation":           {"mallory-credential"},
}

// dotSpoof: PHP folds '.' to '_' when it fills $_SERVER
// (GHSA-49wc-4hcv-v58q), so X.Agent.DID is HTTP_X_AGENT_DID there.
var dotSpoof = http.Header{
	"X.Agent.DID":           {"did:example:mallory"},
	"x.user.did":            {"did:example:mallory-user"},
	"X.Verified.Delegation": {"mallory"},
	"kya.os.agent.did":      {"did:example:mallory"},
}

// spoofEdge is the edge of TestSpoofingMatrix: two TLS listeners (h1 and
// h2), one with Caddy's default header filtering, one with the forged
// underscore and dot names allow-listed.
type spoofEdge struct {
	rec          *recorder
	portDefault  int
	portAllowed  int
	h1, h2       *http.Client
	validToken   string
	invalidToken string
}

// startSpoofEdge starts the edge. Both sites route /public/* straight to
// the upstream (no mcpi: a route the operator left open) and everything
// else through mcpi (trust any), which also answers
// /.well-known/oauth-protected-resource itself.
func startSpoofEdge(t *testing.T) (*spoofEdge, *world) {
	t.Helper()
	rec := &recorder{next: okUpstream}
	up := httptest.NewServer(rec)
	t.Cleanup(up.Close)

	se := &spoofEdge{rec: rec, portDefault: freePort(t), portAllowed: freePort(t)}
	adminPort, httpPort := freePort(t), freePort(t)
	dir := t.TempDir()
	site := func(port int) string {
		return fmt.Sprintf(`https://127.0.0.1:%d {
	bind 127.0.0.1
	tls internal
	handle /public/* {
		reverse_proxy %[2]s
	}
	handle {
		mcpi {
			trust any
		}
		reverse_proxy %[2]s
	}
}
`, port, up.Listener.Addr().String())
	}
	// Exact names, not globs: a glob like x_* would also make Caddy drop
	// every X-… header (it drops the hyphenated twins of allow-listed
	// names), which would hide what the handler does.
	globals := opsGlobals(adminPort, dir, time.Second, fmt.Sprintf(`	local_certs
	auto_https disable_redirects
	http_port %d
	servers 127.0.0.1:%d {
		protocols h1 h2
		expected_underscore_headers x_agent_did x_user_did x_verified_delegation x_agent_reputation_score kya_os_agent_did kya_os_delegation_proof kya_delegation
		expected_dot_headers x.agent.did x.user.did x.verified.delegation kya.os.agent.did
	}
	servers {
		protocols h1 h2
	}
`, httpPort, se.portAllowed))
	caddyfile := globals + "\n" + site(se.portDefault) + "\n" + site(se.portAllowed)

	storage := dir + "/storage"
	ready := func() error {
		roots, err := localRootPool(storage)
		if err != nil {
			return err
		}
		h1 := &http.Client{Transport: tlsTransport(roots, false), Timeout: 10 * time.Second}
		h2 := &http.Client{Transport: tlsTransport(roots, true), Timeout: 10 * time.Second}
		for _, port := range []int{se.portDefault, se.portAllowed} {
			if err := answersHTTP(h2, fmt.Sprintf("https://127.0.0.1:%d/.well-known/oauth-protected-resource", port))(); err != nil {
				return err
			}
		}
		se.h1, se.h2 = h1, h2
		return nil
	}
	startOpsEdge(t, dir, adminPort, caddyfile, ready)
	t.Cleanup(func() {
		se.h1.CloseIdleConnections()
		se.h2.CloseIdleConnections()
	})
	rec.Reset()

	w := opsWorld(t, hostAudience(se.portDefault))
	se.validToken = w.jwt(t, withAudiences(hostAudience(se.portDefault), hostAudience(se.portAllowed)))
	se.invalidToken = tamper(se.validToken)
	return se, w
}

// spoofReply is one response of the edge.
type spoofReply struct {
	status, protoMajor int
	body               []byte
}

func (se *spoofEdge) send(t *testing.T, allowlisted, h2 bool, method, path string, hdr http.Header) spoofReply {
	t.Helper()
	port, client := se.portDefault, se.h1
	if allowlisted {
		port = se.portAllowed
	}
	if h2 {
		client = se.h2
	}
	var body io.Reader
	if method == http.MethodPost {
		body = strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, fmt.Sprintf("https://127.0.0.1:%d%s", port, path), body)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		req.Header[k] = v // as written: no canonicalisation
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading response: %v", err)
	}
	return spoofReply{resp.StatusCode, resp.ProtoMajor, data}
}

// forgedArrivals lists the upstream headers that carry a forged value or
// whose name, folded the way permissive upstreams fold it (case, '_' and '.'
// as '-'), is an identity header.
func forgedArrivals(reqs []record) []string {
	var out []string
	for _, r := range reqs {
		for k, vs := range r.Header {
			n := strings.NewReplacer("_", "-", ".", "-").Replace(strings.ToLower(k))
			named := slices.Contains(identityHeaderNames, n) || strings.HasPrefix(n, "kya-")
			for _, v := range vs {
				if named || strings.Contains(v, spoofMarker) {
					out = append(out, k+": "+v)
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

// TestSpoofingMatrix: forged identity headers (X-Agent-DID, X-User-DID,
// X-Agent-Reputation-Score, X-Verified-Delegation, KYA-*), in odd case,
// duplicated, with '_' or '.' for '-', over HTTP/1.1 and HTTP/2 (TLS, `tls
// internal`), never reach the upstream on a route where mcpi runs, whether
// the request is allowed (valid credential), denied (none, or a bad
// signature) or answered by the edge itself (RFC 9728 metadata).
//
// The route without mcpi (/public/*) is the honest limit: the handler can
// only strip where it runs, so there the forged headers arrive exactly as
// Caddy lets them through (hyphenated names always; '_' and '.' names only
// when the operator allow-lists them). The rows assert that, both to
// document it (an upstream must not trust identity headers on routes the
// edge does not guard) and as the control that shows the allow-listed
// names really get past Caddy to the mcpi routes. Putting mcpi in a site-wide
// `route` ahead of such a handle would not help: mcpi would then demand a
// credential on /public/* as well.
func TestSpoofingMatrix(t *testing.T) {
	se, _ := startSpoofEdge(t)

	routes := []struct {
		name         string
		method, path string
		auth         string
		status       int
		reason       string // of a 401
		upstream     bool   // the request reaches the upstream
		mcpiRuns     bool
	}{
		{"allowed", http.MethodPost, "/mcp", "Bearer " + se.validToken, http.StatusOK, "", true, true},
		{"denied/no-credential", http.MethodPost, "/mcp", "", http.StatusUnauthorized, "", false, true},
		{"denied/bad-signature", http.MethodPost, "/mcp", "Bearer " + se.invalidToken, http.StatusUnauthorized, vc.Reason(vc.ErrSignature), false, true},
		{"edge-answered/resource-metadata", http.MethodGet, "/.well-known/oauth-protected-resource", "", http.StatusOK, "", false, true},
		{"bypassed/no-mcpi", http.MethodGet, "/public/page", "", http.StatusOK, "", true, false},
	}
	for _, proto := range []struct {
		name string
		h2   bool
	}{{"h1", false}, {"h2", true}} {
		for _, set := range spoofSets {
			for _, rt := range routes {
				t.Run(proto.name+"/"+set.name+"/"+rt.name, func(t *testing.T) {
					se.rec.Reset()
					hdr := set.hdr.Clone()
					if rt.auth != "" {
						hdr["Authorization"] = []string{rt.auth}
					}
					resp := se.send(t, set.allowlisted, proto.h2, rt.method, rt.path, hdr)
					if want := map[bool]int{false: 1, true: 2}[proto.h2]; resp.protoMajor != want {
						t.Fatalf("answered over HTTP/%d, want HTTP/%d", resp.protoMajor, want)
					}
					if resp.status != rt.status {
						t.Fatalf("HTTP %d, want %d; body %s", resp.status, rt.status, resp.body)
					}
					if rt.status == http.StatusUnauthorized {
						body, ok := decodeEdgeError(resp.body)
						if !ok || body.Error != "invalid_token" || body.Reason != rt.reason {
							t.Errorf("body %s, want invalid_token with reason %q", resp.body, rt.reason)
						}
					}
					if bytes.Contains(resp.body, []byte(spoofMarker)) {
						t.Errorf("response echoes a forged value: %s", resp.body)
					}

					reqs := se.rec.Requests()
					if got := len(reqs) > 0; got != rt.upstream {
						t.Fatalf("upstream saw %d requests, want reached=%t", len(reqs), rt.upstream)
					}
					arrived := forgedArrivals(reqs)
					switch {
					case rt.mcpiRuns && len(arrived) > 0:
						t.Errorf("forged identity headers reached the upstream through mcpi: %q", arrived)
					case !rt.mcpiRuns && set.publicArrives && len(arrived) == 0:
						t.Errorf("control: on the route without mcpi the forged headers should arrive (Caddy lets these names through), none did")
					case !rt.mcpiRuns && !set.publicArrives && len(arrived) > 0:
						t.Errorf("Caddy should have dropped these names before any route, but the upstream saw %q", arrived)
					}
					if rt.auth != "" && rt.upstream {
						assertNotForwarded(t, reqs, se.validToken)
					}
				})
			}
		}
	}
}

// TestSpoofingCarrierSpellings: KYA-Delegation and KYA-OS-Delegation-
// Credential are credential carriers, not identity headers: spelled as
// the carrier (any case) they are read, verified and removed; holding
// something that is not the credential next to a valid one they make the
// request ambiguous (400); spelled with underscores they are never read
// (so alone they leave the request without a credential) and never
// forwarded.
func TestSpoofingCarrierSpellings(t *testing.T) {
	se, w := startSpoofEdge(t)
	tok := se.validToken
	otherTok := w.jwt(t, withAudiences(hostAudience(se.portDefault), hostAudience(se.portAllowed)))

	cases := []struct {
		name        string
		allowlisted bool
		hdr         http.Header
		status      int
		description string // error_description of a rejection
	}{
		{"KYA-Delegation holds the credential", false, http.Header{"KYA-Delegation": {tok}}, http.StatusOK, ""},
		{"kya-delegation lower case", false, http.Header{"kya-delegation": {tok}}, http.StatusOK, ""},
		{"KYA-Delegation twice, same credential", false, http.Header{"KYA-Delegation": {tok, tok}}, http.StatusOK, ""},
		{"kya-os-delegation-credential lower case", false, http.Header{"kya-os-delegation-credential": {tok}}, http.StatusOK, ""},
		{
			"KYA-Delegation not a credential beside a valid bearer", false,
			http.Header{"Authorization": {"Bearer " + tok}, "KYA-Delegation": {spoofMarker}},
			http.StatusBadRequest, "conflicting delegation credentials",
		},
		{
			"KYA-Delegation twice, second not a credential", false,
			http.Header{"KYA-Delegation": {tok, spoofMarker}},
			http.StatusBadRequest, "conflicting delegation credentials",
		},
		{
			// Allow-listed through Caddy, but not a carrier: the request
			// has no credential.
			"Kya_Delegation alone", true,
			http.Header{"Kya_Delegation": {tok}},
			http.StatusUnauthorized, "no delegation credential presented",
		},
		{
			"Kya_Delegation beside a valid bearer", true,
			http.Header{"Authorization": {"Bearer " + tok}, "Kya_Delegation": {otherTok}},
			http.StatusOK, "",
		},
	}
	for _, proto := range []struct {
		name string
		h2   bool
	}{{"h1", false}, {"h2", true}} {
		for _, tc := range cases {
			t.Run(proto.name+"/"+tc.name, func(t *testing.T) {
				se.rec.Reset()
				resp := se.send(t, tc.allowlisted, proto.h2, http.MethodPost, "/mcp", tc.hdr)
				if resp.status != tc.status {
					t.Fatalf("HTTP %d, want %d; body %s", resp.status, tc.status, resp.body)
				}
				reqs := se.rec.Requests()
				if tc.status != http.StatusOK {
					if body, ok := decodeEdgeError(resp.body); !ok || body.Description != tc.description {
						t.Errorf("body %s, want error_description %q", resp.body, tc.description)
					}
					if len(reqs) != 0 {
						t.Errorf("upstream saw %d requests for a rejected request", len(reqs))
					}
					return
				}
				if len(reqs) != 1 {
					t.Fatalf("upstream saw %d requests, want 1", len(reqs))
				}
				assertNotForwarded(t, reqs, tok, otherTok)
				if got := forgedArrivals(reqs); len(got) > 0 {
					t.Errorf("upstream saw %q", got)
				}
			})
		}
	}
}
