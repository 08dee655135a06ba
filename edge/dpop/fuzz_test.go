package dpop_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/challenge"
	"github.com/mcpi-edge/caddy-mcpi/edge/dpop"
)

// FuzzCheck feeds arbitrary proofs to Check: it never panics, every
// refusal wraps one of the package's errors, and an accepted proof is
// accepted once only.
func FuzzCheck(f *testing.F) {
	ed, ec := newEdKey(f), newECKey(f)
	f.Add(ed.proof("a"))
	f.Add(ec.proof("b"))
	f.Add(ed.signParts(ed.parts("POST", testURL+"?x", testToken, testNow, "c")))
	f.Add("eyJ0eXAiOiJkcG9wK2p3dCJ9.e30.AA")
	f.Add("..")
	f.Add("")
	known := []error{dpop.ErrMissing, dpop.ErrMalformed, dpop.ErrAlg, dpop.ErrStale, dpop.ErrMismatch, dpop.ErrReplayed}
	f.Fuzz(func(t *testing.T, proof string) {
		store := challenge.NewMemoryStore(context.Background(), challenge.WithMemoryClock(func() time.Time { return testNow }))
		defer store.Close()
		c := dpop.NewChecker(store, dpop.WithClock(func() time.Time { return testNow }))
		want := dpop.Expect{Method: "GET", URL: testURL, AccessToken: testToken}
		p, err := c.Check(context.Background(), proof, want)
		if err != nil {
			for _, k := range known {
				if errors.Is(err, k) {
					if strings.Contains(err.Error(), proof) && len(proof) > 8 {
						t.Fatalf("error quotes the proof: %v", err)
					}
					return
				}
			}
			t.Fatalf("Check = %v: wraps none of the package's errors", err)
		}
		if p.JKT == "" || p.Key == nil || p.JTI == "" {
			t.Fatalf("accepted proof without key or jti: %+v", p)
		}
		if _, err := c.Check(context.Background(), proof, want); !errors.Is(err, dpop.ErrReplayed) {
			t.Fatalf("accepted twice: %v", err)
		}
	})
}
