package integration

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/crypto/bcrypt"

	"github.com/mcpi-edge/caddy-mcpi/integration/mcpserver"
)

// The front door's users: basic_auth accounts of the test site.
const (
	frontDoorUser     = "alice"
	frontDoorOther    = "bob"
	frontDoorPassword = "correct horse battery staple"
)

// The tool scopes of the front-door route. Each opens one demo tool.
const (
	scopeGreet  = "greet:execute"
	scopeWhoami = "whoami:read"
	scopeCount  = "count:execute"
)

// frontDoor is a real Caddy whose mcpi route is its own authorization
// server, in front of the recorded demo MCP server.
type frontDoor struct {
	*harness
}

// frontDoorSite is the site a user following docs/onboarding.md writes:
// basic_auth on the authorize path before mcpi, the authorization server on,
// the route trusting the users whose DIDs the edge hosts, and a scope per
// tool. The upstream sees who called through header_up.
func frontDoorSite(port int, upstream, hash string) string {
	return fmt.Sprintf(`:%[1]d {
	bind 127.0.0.1
	route {
		basic_auth /oauth/authorize {
			%[3]s %[5]s
			%[4]s %[5]s
		}
		mcpi {
			trust authorization_server
			authorization_server {
				credential_lifetime 1h
			}
			tool greet {
				scopes %[6]s
			}
			tool whoami {
				scopes %[7]s
			}
			tool count {
				scopes %[8]s
			}
			tool_default deny
		}
		reverse_proxy %[2]s {
			header_up X-Agent-DID {mcpi.agent_did}
			header_up X-User-DID {mcpi.user_did}
			header_up X-Edge-Scopes {mcpi.scopes}
		}
	}
}
`, port, upstream, frontDoorUser, frontDoorOther, hash, scopeGreet, scopeWhoami, scopeCount)
}

// newFrontDoor starts the demo MCP server and a Caddy serving frontDoorSite
// in front of it.
func newFrontDoor(t *testing.T) *frontDoor {
	t.Helper()
	// The lowest bcrypt cost: basic_auth checks the password on every
	// request to the authorize path, and the default cost takes a second
	// on a loaded test machine.
	hash, err := bcrypt.GenerateFromPassword([]byte(frontDoorPassword), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{next: mcpserver.Handler(mcpserver.Options{CountInterval: countInterval})}
	up := serveUpstream(t, rec)
	h := newEdgeHarness(t, rec)
	dir := t.TempDir()
	h.start(dir, testCaddyfile(freePort(t), filepath.Join(dir, "storage"),
		frontDoorSite(h.port, up.Listener.Addr().String(), string(hash))))
	return &frontDoor{harness: h}
}

// mcpURL is the MCP endpoint an agent is configured with.
func (fd *frontDoor) mcpURL() string { return fd.base + mcpserver.Path }

// userDIDPattern matches a user DID this edge hosts:
// did:web:<host%3Aport>:oauth:users:<opaque id>.
func (fd *frontDoor) userDIDPattern() *regexp.Regexp {
	return regexp.MustCompile(`^did:web:127\.0\.0\.1%3A` + strconv.Itoa(fd.port) + `:oauth:users:([A-Za-z0-9_-]+)$`)
}

// assertHostedUserDID checks that did is a did:web of this edge whose
// document the edge serves, names the DID itself, and has a key to verify
// credentials with; the opaque id never contains the login name.
func (fd *frontDoor) assertHostedUserDID(ctx context.Context, t *testing.T, did, login string) {
	t.Helper()
	m := fd.userDIDPattern().FindStringSubmatch(did)
	if m == nil {
		t.Fatalf("user DID %q is not a did:web hosted by this edge (want %s)", did, fd.userDIDPattern())
	}
	if strings.Contains(strings.ToLower(m[1]), login) {
		t.Errorf("user DID %q shows the login name %q", did, login)
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fd.base+"/oauth/users/"+m[1]+"/did.json", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET the DID document of %s: HTTP %d %s", did, resp.StatusCode, body)
	}
	var doc struct {
		ID                 string            `json:"id"`
		VerificationMethod []json.RawMessage `json:"verificationMethod"`
		AssertionMethod    []json.RawMessage `json:"assertionMethod"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatalf("the DID document of %s is not JSON: %v\n%s", did, err, body)
	}
	if doc.ID != did || len(doc.VerificationMethod) == 0 || len(doc.AssertionMethod) == 0 {
		t.Fatalf("the DID document of %s: id %q, %d verification methods, %d assertion methods; want its own id and a key\n%s",
			did, doc.ID, len(doc.VerificationMethod), len(doc.AssertionMethod), body)
	}
}

// jwtClaims decodes the payload of a compact JWS without checking it: the
// test reads what the client was given, the edge is what checks it.
func jwtClaims(t *testing.T, token string) map[string]any {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("access token is not a compact JWS (%d parts)", len(parts))
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatalf("access token payload: %v", err)
	}
	var claims map[string]any
	if err := json.Unmarshal(raw, &claims); err != nil {
		t.Fatalf("access token payload: %v", err)
	}
	return claims
}

// audiences returns a JWT's aud claim as a list (it may be a string).
func audiences(claims map[string]any) []string {
	switch a := claims["aud"].(type) {
	case string:
		return []string{a}
	case []any:
		var out []string
		for _, v := range a {
			if s, ok := v.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// identityOfCall returns the X-Agent-DID and X-User-DID the upstream got
// with its tools/call of tool, failing if it got none.
func identityOfCall(t *testing.T, reqs []record, tool string) (agent, user string) {
	t.Helper()
	for _, r := range reqs {
		var m rpcRequest
		if r.Method == http.MethodPost && json.Unmarshal(r.Body, &m) == nil && m.Method == "tools/call" && m.Params.Name == tool {
			return r.Header.Get("X-Agent-DID"), r.Header.Get("X-User-DID")
		}
	}
	t.Fatalf("the upstream never received a tools/call of %s; it got %v", tool, rpcMethods(reqs))
	return "", ""
}

// connected is the outcome of an MCP client's Connect.
type connected struct {
	cs  *mcp.ClientSession
	err error
}

// connectInBackground connects a Go SDK client over transport on another
// goroutine: with an authorization flow in the middle, Connect returns only
// after the test goroutine has driven the browser through the consent page.
func connectInBackground(ctx context.Context, name string, transport mcp.Transport) <-chan connected {
	done := make(chan connected, 1)
	go func() {
		client := mcp.NewClient(&mcp.Implementation{Name: name, Version: "0"}, nil)
		cs, err := client.Connect(ctx, transport, nil)
		done <- connected{cs, err}
	}()
	return done
}
