package toolpolicy

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestRequestStateResume: the resume token sealed in a requestState comes
// back for the agent and tool it was issued to; a truncated, altered or
// foreign state is refused.
func TestRequestStateResume(t *testing.T) {
	s, err := newStateSealer(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	st := s.sealResume("did:key:zA", "files", "resume-1")
	if got, err := s.openResume(st, "did:key:zA", "files"); err != nil || got != "resume-1" {
		t.Fatalf("openResume = %q, %v", got, err)
	}
	if got, err := s.openResume(s.seal("did:key:zA", "files"), "did:key:zA", "files"); err != nil || got != "" {
		t.Fatalf("a state without a resume token: %q, %v", got, err)
	}
	for _, c := range []struct{ state, agent, tool string }{
		{st, "did:key:zB", "files"},
		{st, "did:key:zA", "file"},
		{st, "did:key:zA", "filesresume-1"},
		{st[:len(st)-2], "did:key:zA", "files"},
		{st + "A", "did:key:zA", "files"},
		{requestStatePrefix, "did:key:zA", "files"},
		{"mcpi1.!!!", "did:key:zA", "files"},
	} {
		if _, err := s.openResume(c.state, c.agent, c.tool); err == nil {
			t.Errorf("state %q opened for %s/%s", c.state, c.agent, c.tool)
		}
	}
}

func FuzzRequestStateOpen(f *testing.F) {
	s, _ := newStateSealer(context.Background(), nil)
	f.Add(s.sealResume("did:key:zA", "files", "r"), "did:key:zA", "files")
	f.Add("mcpi1.AAAA", "", "")
	f.Fuzz(func(t *testing.T, state, agent, tool string) {
		_, _ = s.openResume(state, agent, tool) // must not panic
	})
}

// TestRequestStateExpired: a state opened after requestStateTTL is refused
// as expired, with a message telling the client to call again without it.
func TestRequestStateExpired(t *testing.T) {
	s, err := newStateSealer(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	clock := time.Now()
	s.now = func() time.Time { return clock }
	st := s.seal("did:key:zA", "files")
	clock = clock.Add(requestStateTTL - time.Second)
	if _, err := s.openResume(st, "did:key:zA", "files"); err != nil {
		t.Fatalf("a live state refused: %v", err)
	}
	clock = clock.Add(2 * time.Second)
	if _, err := s.openResume(st, "did:key:zA", "files"); !errors.Is(err, errStateExpired) || !strings.Contains(err.Error(), "call the tool again") {
		t.Fatalf("an expired state: %v", err)
	}
}
