package edge

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// TestRejectLogNamesCarrierAndIssuer: the debug line of a refused
// credential tells the operator how it came and whom it claims as issuer,
// and never holds the credential itself.
func TestRejectLogNamesCarrierAndIssuer(t *testing.T) {
	f := newFixture(t)
	core, logs := observer.New(zapcore.DebugLevel)
	h, err := New(Config{TrustedIssuers: []string{"did:web:someone-else.example"}}, WithLogger(zap.New(core)), WithHooks(testHooks))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	cred := f.jwt(t, func(tm *vc.Template) { tm.ExpiresAt = time.Now().Add(time.Hour) })
	r := newRequest(http.MethodGet, "/mcp", "")
	r.Header.Set("KYA-OS-Delegation-Credential", cred)
	if res := serve(t, h, r); res.rec.Code != http.StatusUnauthorized || res.called {
		t.Fatalf("status %d (forwarded: %v), want 401", res.rec.Code, res.called)
	}
	lines := logs.FilterMessage("request rejected").All()
	if len(lines) != 1 {
		t.Fatalf("%d 'request rejected' lines, want 1", len(lines))
	}
	fields := lines[0].ContextMap()
	if fields["carrier"] != "kya_os_delegation_credential" {
		t.Errorf("carrier = %v, want kya_os_delegation_credential", fields["carrier"])
	}
	if fields["issuer"] != f.user.did {
		t.Errorf("issuer = %v, want %s", fields["issuer"], f.user.did)
	}
	for _, e := range logs.All() {
		for k, v := range e.ContextMap() {
			if s, ok := v.(string); ok && strings.Contains(s, cred[strings.LastIndexByte(cred, '.')+1:]) {
				t.Errorf("log field %s holds the credential's signature", k)
			}
		}
	}
}
