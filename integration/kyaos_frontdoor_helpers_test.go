package integration

import (
	"context"
	"crypto"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwk"
	"golang.org/x/crypto/bcrypt"

	"github.com/mcpi-edge/caddy-mcpi/didresolver"
	"github.com/mcpi-edge/caddy-mcpi/integration/mcpserver"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// kyaFrontDoor is a front door whose route also trusts a KYA-OS issuer:
// its agents arrive with a delegation of their own, lacking a scope, and
// the edge's consent page gives them the rest.
type kyaFrontDoor struct {
	*harness
	issuer, agent, user party
}

// kyaFrontDoorSite is the front-door site of docs/onboarding.md's KYA-OS
// path: level 2 (the edge signs the challenge), the KYA-OS issuer and the
// edge's own users trusted, draft-kya-http-02 on with a session of ttl.
func kyaFrontDoorSite(port int, upstream, hash, issuer, ttl string) string {
	return fmt.Sprintf(`:%[1]d {
	bind 127.0.0.1
	route {
		basic_auth /oauth/authorize {
			%[3]s %[4]s
		}
		mcpi {
			level 2
			trust %[5]s
			trust authorization_server
			authorization_server {
				kya_http %[6]s
				kya_http_interval 1s
			}
			tool greet {
				scopes %[7]s
			}
			tool whoami {
				scopes %[8]s
			}
			tool_default deny
		}
		reverse_proxy %[2]s
	}
}
`, port, upstream, frontDoorUser, hash, issuer, ttl, scopeGreet, scopeWhoami)
}

func newKYAFrontDoor(t *testing.T, ttl string) *kyaFrontDoor {
	t.Helper()
	hash, err := bcrypt.GenerateFromPassword([]byte(frontDoorPassword), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{next: mcpserver.Handler(mcpserver.Options{CountInterval: countInterval})}
	up := serveUpstream(t, rec)
	h := newEdgeHarness(t, rec)
	fd := &kyaFrontDoor{harness: h, issuer: newParty(t, didresolver.Ed25519),
		agent: newParty(t, didresolver.Ed25519), user: newParty(t, didresolver.Ed25519)}
	dir := t.TempDir()
	h.start(dir, testCaddyfile(freePort(t), filepath.Join(dir, "storage"),
		kyaFrontDoorSite(h.port, up.Listener.Addr().String(), string(hash), fd.issuer.did, ttl)))
	return fd
}

// greetOnly is the agent's own delegation: greet, not whoami.
func (fd *kyaFrontDoor) greetOnly(t *testing.T) string {
	t.Helper()
	return issueJWT(t, fd.issuer.key, fd.issuer.kid, vc.Template{
		AgentDID: fd.agent.did, UserDID: fd.user.did, Audience: []string{fd.hostAudience()},
		Scopes: []string{scopeGreet}, ExpiresAt: time.Now().Add(time.Hour),
	})
}

// whoamiCalls are the tools/call whoami requests the upstream received.
func whoamiCalls(reqs []record) []record {
	var out []record
	for _, r := range reqs {
		var m rpcRequest
		if r.Method == http.MethodPost && json.Unmarshal(r.Body, &m) == nil && m.Method == "tools/call" && m.Params.Name == "whoami" {
			out = append(out, r)
		}
	}
	return out
}

// edgeKey fetches the edge's did.json and returns its DID and the public
// key named kid, as an agent checking a challenge_proof would.
func edgeKey(ctx context.Context, t *testing.T, base, kid string) (string, crypto.PublicKey) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/.well-known/did.json", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /.well-known/did.json: HTTP %d %s", resp.StatusCode, body)
	}
	var doc struct {
		ID                 string `json:"id"`
		VerificationMethod []struct {
			ID  string          `json:"id"`
			JWK json.RawMessage `json:"publicKeyJwk"`
		} `json:"verificationMethod"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatalf("did.json: %v\n%s", err, body)
	}
	for _, vm := range doc.VerificationMethod {
		if vm.ID != kid && !strings.HasSuffix(kid, vm.ID) {
			continue
		}
		k, err := jwk.ParseKey(vm.JWK)
		if err != nil {
			t.Fatalf("did.json key %s: %v", vm.ID, err)
		}
		var raw any
		if err := k.Raw(&raw); err != nil {
			t.Fatal(err)
		}
		pub, ok := raw.(crypto.PublicKey)
		if !ok {
			t.Fatalf("did.json key %s is %T", vm.ID, raw)
		}
		return doc.ID, pub
	}
	t.Fatalf("did.json of the edge has no key %q:\n%s", kid, body)
	return "", nil
}
