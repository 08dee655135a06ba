package cache

import (
	"bytes"
	"context"
	"testing"

	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// TestCacheLeavesInputUnchanged: Verify never writes into the credential
// it is given, on a miss, a hit or a failure. The edge passes a header's
// bytes without copying them, so a write would change a Go string.
func TestCacheLeavesInputUnchanged(t *testing.T) {
	f := newFixture(t)
	good := issue(t, f.ed, f.vc11Claims(f.ed))
	tampered := bytes.Clone(good)
	tampered[len(tampered)-3] ^= 1
	inputs := map[string][]byte{
		"valid VC-JWT":  good,
		"bad signature": tampered,
		"padded":        append(append([]byte(" \t"), good...), '\n'),
		"truncated":     good[:len(good)/2],
		"three dots":    []byte("a.b.c.d"),
	}
	v, _, _ := f.cached(&testClock{t: fixedNow}, 10, nil)
	for name, raw := range inputs {
		want := bytes.Clone(raw)
		for range 2 { // the second call of a good one is a hit
			_, err := v.Verify(context.Background(), raw, vc.ForAudience(serverDID))
			if ok := name == "valid VC-JWT" || name == "padded"; ok != (err == nil) {
				t.Fatalf("%s: Verify: %v", name, err)
			}
		}
		if !bytes.Equal(raw, want) {
			t.Errorf("%s: Verify changed its input", name)
		}
	}
}
