package proofstep

import (
	"testing"

	"github.com/mcpi-edge/caddy-mcpi/edge/site"
)

// TestHostDID: the remembered audience is the did:web of the Host asked
// for, whichever Host came before.
func TestHostDID(t *testing.T) {
	var m hostDID
	for _, host := range []string{"a.example", "a.example", "127.0.0.1:8443", "a.example", "[::1]:8443", "[::1]:8443"} {
		if got, want := m.of(host), site.Audiences(host)[0]; got != want {
			t.Fatalf("of(%q) = %q, want %q", host, got, want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { m.of("[::1]:8443") }); n != 0 {
		t.Errorf("the same Host again: %v allocations, want 0", n)
	}
}
