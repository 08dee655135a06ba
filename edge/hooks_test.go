package edge

import (
	"context"
	"net/http"
	"strings"
	"sync"

	"github.com/google/uuid"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// testReplacer stands in for the host's placeholders: the hooks of the
// tests write the identity into it, as Caddy's adapter writes Caddy's.
type testReplacer struct {
	mu   sync.Mutex
	vals map[string]any
}

func newTestReplacer() *testReplacer { return &testReplacer{vals: map[string]any{}} }

func (r *testReplacer) Set(k string, v any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.vals[k] = v
}

func (r *testReplacer) GetString(k string) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	v, ok := r.vals[k]
	if !ok && k == "http.request.uuid" {
		// Made on first use and kept, as Caddy's replacer does.
		v, ok = uuid.NewString(), true
		r.vals[k] = v
	}
	s, _ := v.(string)
	return s, ok
}

type testCtxKey int

const (
	replacerKey testCtxKey = iota
	trustedProxyKey
)

// prepareRequest attaches repl to r, as a host attaches its request state.
func prepareRequest(r *http.Request, repl *testReplacer) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), replacerKey, repl))
}

// withTrustedProxy marks r as coming through a trusted proxy.
func withTrustedProxy(r *http.Request, trusted bool) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), trustedProxyKey, trusted))
}

func replacerOf(r *http.Request) *testReplacer {
	repl, _ := r.Context().Value(replacerKey).(*testReplacer)
	return repl
}

// testHooks are the hooks every test handler gets: the identity goes to
// the request's testReplacer under the names Caddy's adapter uses.
var testHooks = Hooks{
	Identity: func(r *http.Request, d *vc.Delegation) {
		repl := replacerOf(r)
		if repl == nil {
			return
		}
		repl.Set("http.auth.user.id", d.AgentDID)
		repl.Set("http.auth.user.agent_did", d.AgentDID)
		repl.Set("http.auth.user.user_did", d.UserDID)
		repl.Set("mcpi.agent_did", d.AgentDID)
		repl.Set("mcpi.user_did", d.UserDID)
		repl.Set("mcpi.scopes", strings.Join(d.Scopes, " "))
		repl.Set("mcpi.delegation_id", d.DelegationID)
		repl.Set("mcpi.issuer", d.Issuer)
	},
	RequestID: func(r *http.Request) string {
		if repl := replacerOf(r); repl != nil {
			id, _ := repl.GetString("http.request.uuid")
			return id
		}
		return ""
	},
	TrustedProxy: func(r *http.Request) bool {
		trusted, _ := r.Context().Value(trustedProxyKey).(bool)
		return trusted
	},
	UpstreamHeader: func(r *http.Request, name string) (string, bool) {
		if repl := replacerOf(r); repl != nil {
			return repl.GetString("http.reverse_proxy.header." + name)
		}
		return "", false
	},
}
