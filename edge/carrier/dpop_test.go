package carrier

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestAuthToken(t *testing.T) {
	tests := []struct {
		in, tok    string
		isDPoP, ok bool
	}{
		{"Bearer abc", "abc", false, true},
		{"DPoP abc", "abc", true, true},
		{"dpop\tabc ", "abc", true, true},
		{"DPOP  abc", "abc", true, true},
		{"DPoPabc", "", false, false},
		{"Basic dXNlcjpwYXNz", "", false, false},
	}
	for _, tt := range tests {
		tok, isDPoP, ok := authToken(tt.in)
		if tok != tt.tok || isDPoP != tt.isDPoP || ok != tt.ok {
			t.Errorf("authToken(%q) = %q, %v, %v; want %q, %v, %v", tt.in, tok, isDPoP, ok, tt.tok, tt.isDPoP, tt.ok)
		}
	}
}

// TestDPoPSchemeFoundAndRemoved: a delegation sent with the DPoP scheme is
// found (marked DPoP) and removed with its proof header; someone else's
// DPoP token and its proof stay for the upstream.
func TestDPoPSchemeFoundAndRemoved(t *testing.T) {
	ours := fakeJWT(`{"alg":"EdDSA","typ":"JWT"}`, `{"iss":"did:key:z","vc":{}}`)
	foreign := fakeJWT(`{"alg":"RS256","typ":"at+jwt"}`, `{"sub":"alice"}`)
	rd := New(Config{Enabled: All, MaxBody: 1 << 20})

	r := httptest.NewRequest(http.MethodGet, "/mcp", nil)
	r.Header.Set("Authorization", "DPoP "+ours)
	r.Header.Set("DPoP", "proof")
	f, err := rd.Find(httptest.NewRecorder(), r)
	if err != nil || len(f.Credentials) != 1 || !f.Credentials[0].DPoP || string(f.Credentials[0].Raw) != ours || f.ForeignBearer {
		t.Fatalf("Find = %+v, %v", f, err)
	}
	rd.Remove(r, f)
	if r.Header.Get("Authorization") != "" || r.Header.Get("DPoP") != "" {
		t.Fatalf("after Remove: %v", r.Header)
	}

	r = httptest.NewRequest(http.MethodGet, "/mcp", nil)
	r.Header.Set("Authorization", "Bearer "+ours)
	r.Header.Set("DPoP", "proof")
	f, _ = rd.Find(httptest.NewRecorder(), r)
	if len(f.Credentials) != 1 || f.Credentials[0].DPoP {
		t.Fatalf("Bearer scheme: %+v", f)
	}
	rd.Remove(r, f)
	if r.Header.Get("DPoP") != "" {
		t.Fatal("the DPoP header sent beside our bearer reached the upstream")
	}

	r = httptest.NewRequest(http.MethodGet, "/mcp", nil)
	r.Header.Set("Authorization", "DPoP "+foreign)
	r.Header.Set("DPoP", "proof")
	f, _ = rd.Find(httptest.NewRecorder(), r)
	if len(f.Credentials) != 0 || f.ForeignBearer {
		t.Fatalf("foreign DPoP token: %+v", f)
	}
	rd.Remove(r, f)
	if r.Header.Get("Authorization") != "DPoP "+foreign || r.Header.Get("DPoP") != "proof" {
		t.Fatalf("foreign DPoP token or its proof removed: %v", r.Header)
	}

	// Passthrough: the credential and its proof travel on together.
	pt := New(Config{Enabled: All, MaxBody: 1 << 20, Passthrough: true})
	r = httptest.NewRequest(http.MethodGet, "/mcp", nil)
	r.Header.Set("Authorization", "DPoP "+ours)
	r.Header.Set("DPoP", "proof")
	f, _ = pt.Find(httptest.NewRecorder(), r)
	pt.Remove(r, f)
	if r.Header.Get("Authorization") == "" || r.Header.Get("DPoP") == "" {
		t.Fatalf("passthrough removed: %v", r.Header)
	}
}
