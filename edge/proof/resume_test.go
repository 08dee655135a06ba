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
	store := challenge.NewMemoryStore(ctx)
	g := New(Config{}, nil, store).WithSessions(store)
	now := time.Now()
	token, exp, err := g.IssueResume(ctx, "did:key:zUser", "did:key:zA", "files_write", now)
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
		rf := g.RedeemResume(ctx, c.token, "did:key:zUser", c.agent, c.tool, c.at)
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
	// An anonymous caller (no owner) gets no token.
	if _, _, err := g.IssueResume(ctx, "", "", "public", now); err == nil {
		t.Fatal("issued a token to an anonymous caller")
	}
	// Without a store that keeps owned records, nothing is issued.
	if _, _, err := New(Config{}, nil, nil).IssueResume(ctx, "u", "a", "b", now); err == nil {
		t.Fatal("issued without a store")
	}
}

// TestResumeTokensBoundedPerOwner: one user's agent calling tools it
// lacks scopes for pushes out only that user's oldest tokens; another
// user's token stays redeemable, whatever the first one does.
func TestResumeTokensBoundedPerOwner(t *testing.T) {
	ctx := context.Background()
	store := challenge.NewMemoryStore(ctx, challenge.WithMaxEntries(maxResumePerOwner+8))
	g := New(Config{}, nil, store).WithSessions(store)
	now := time.Now()
	theirs, _, err := g.IssueResume(ctx, "did:key:zVictim", "did:key:zV", "files_write", now)
	if err != nil {
		t.Fatal(err)
	}
	var first string
	for i := range 3 * maxResumePerOwner {
		tok, _, err := g.IssueResume(ctx, "did:key:zFlooder", "did:key:zF", "files_write", now)
		if err != nil {
			t.Fatalf("token %d of the flooding user: %v", i, err)
		}
		if i == 0 {
			first = tok
		}
	}
	if rf := g.RedeemResume(ctx, first, "did:key:zFlooder", "did:key:zF", "files_write", now); rf == nil || rf.Reason != ResumeUnknown {
		t.Fatalf("the flooding user's oldest token: %+v, want %s", rf, ResumeUnknown)
	}
	if rf := g.RedeemResume(ctx, theirs, "did:key:zVictim", "did:key:zV", "files_write", now); rf != nil {
		t.Fatalf("another user's token after the flood: %s", rf.Reason)
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
