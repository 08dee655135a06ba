package proof

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/challenge"
)

// TestResumeToken: where the retry carries the token, and what is refused
// as malformed rather than read one way here and another upstream.
func TestResumeToken(t *testing.T) {
	for _, c := range []struct {
		params string
		token  string
		ok     bool
		err    bool
	}{
		{`{"name":"x"}`, "", false, false},
		{`{"name":"x","_meta":{}}`, "", false, false},
		{`{"_meta":{"org.kya-os/resume-token":"mcpi-rt-a"}}`, "mcpi-rt-a", true, false},
		{`{"_meta":{"org.kya-os/resume-token":"mcpi-rt-\u0061"}}`, "mcpi-rt-a", true, false},
		{`{"_meta":{"org.kya-os/resume-token":1}}`, "", false, true},
		{`{"_meta":{"org.kya-os/resume-token":null}}`, "", false, true},
		{`{"_meta":{"org.kya-os/resume-token":""}}`, "", false, true},
		{`{"_meta":{"org.kya-os/resume-token":["a"]}}`, "", false, true},
		{`{"_meta":{"org.kya-os/resume-token":"a","org.kya-os/resume-token":"b"}}`, "", false, true},
		{`{"_meta":{"org.kya-os/resume-token":"a","ORG.kya-os/resume-token":"b"}}`, "", false, true},
		{`{"_meta":{"org.kya-os/resume-token":"` + strings.Repeat("a", maxResumeToken+1) + `"}}`, "", false, true},
	} {
		token, ok, err := ResumeToken([]byte(c.params))
		if token != c.token || ok != c.ok || (err != nil) != c.err {
			t.Errorf("%s: %q %v %v", c.params, token, ok, err)
		}
	}
}

func FuzzResumeToken(f *testing.F) {
	f.Add([]byte(`{"_meta":{"org.kya-os/resume-token":"mcpi-rt-a"}}`))
	f.Add([]byte(`{"_meta":{"org.kya-os/resume-token":"a","org.kya-os/resume-token":"b"}}`))
	f.Fuzz(func(t *testing.T, params []byte) {
		token, ok, err := ResumeToken(params)
		if (ok && (token == "" || err != nil)) || len(token) > maxResumeToken {
			t.Fatalf("%q %v %v", token, ok, err)
		}
	})
}

// TestRedeemResume: a token is redeemed once, by the agent it was issued
// to, for its tool, before its end; every other use is refused with its
// reason, and a foreign caller does not burn it.
func TestRedeemResume(t *testing.T) {
	ctx := context.Background()
	g := New(Config{}, nil, challenge.NewMemoryStore(ctx))
	now := time.Now()
	token, exp, err := g.IssueResume(ctx, "did:key:zA", "files_write", now)
	if err != nil || !IsEdgeResume(token) || !exp.Equal(now.Add(ResumeTTL)) {
		t.Fatal(token, exp, err)
	}
	for _, c := range []struct {
		token, agent, tool string
		at                 time.Time
		reason             string
	}{
		{token, "did:key:zB", "files_write", now, ResumeForeign},
		{token, "did:key:zA", "echo", now, ResumeForeign},
		{token, "did:key:zA", "files_write", now.Add(ResumeTTL), ResumeExpired},
		{ResumePrefix + "forged", "did:key:zA", "files_write", now, ResumeUnknown},
		{token, "did:key:zA", "files_write", now, ""},
		{token, "did:key:zA", "files_write", now, ResumeReplayed},
	} {
		rf := g.RedeemResume(ctx, c.token, c.agent, c.tool, c.at)
		got := ""
		if rf != nil {
			got = rf.Reason
			if rf.Status != http.StatusForbidden || rf.RPC.Code != CodeProof || rf.RPC.Data["reason"] != c.reason {
				t.Errorf("%+v", rf)
			}
		}
		if got != c.reason {
			t.Errorf("%s/%s: %q, want %q", c.agent, c.tool, got, c.reason)
		}
	}
	// Issued to an anonymous caller: any agent redeems it, for its tool.
	anon, _, _ := g.IssueResume(ctx, "", "public", now)
	if rf := g.RedeemResume(ctx, anon, "did:key:zC", "public", now); rf != nil {
		t.Fatal(rf.Reason)
	}
	// Without a store, nothing is issued and nothing redeemed.
	if _, _, err := New(Config{}, nil, nil).IssueResume(ctx, "a", "b", now); err == nil {
		t.Fatal("issued without a store")
	}
}

// TestUpstreamProofKept: when the edge signs a result that carries the
// upstream's own response proof, the upstream's moves, byte for byte, to
// UpstreamProofKey and the canonical key holds the edge's.
func TestUpstreamProofKept(t *testing.T) {
	g := New(Config{ResponseProof: SignBody}, nil, nil)
	up := `{"jws":"upstream.jws.sig","meta":{"did":"did:web:up"}}`
	res := `{"jsonrpc":"2.0","id":1,"result":{"content":[],"_meta":{"a":1,"org.kya-os/response-proof":` + up + `}}}`
	rec := through(t, g, 200, "application/json", res)
	body := rec.Body.String()
	if !strings.Contains(body, `"`+UpstreamProofKey+`":`+up) || !strings.Contains(body, `"a":1`) ||
		strings.Count(body, `"org.kya-os/response-proof"`) != 1 || strings.Contains(body, `"org.kya-os/response-proof":`+up) {
		t.Fatalf("%s", body)
	}
}
