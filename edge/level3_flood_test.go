package edge

import (
	"net/http"
	"strings"
	"testing"

	"github.com/mcpi-edge/caddy-mcpi/challenge"
)

// Anonymous handshakes write nothing to the shared store: a flood of them
// (1 KB agent DIDs, many more than the store holds) is answered, and the
// store still has room for a credentialed agent's answer afterwards.
func TestHandshakeFloodLeavesStoreEmpty(t *testing.T) {
	f := newFixture(t)
	store := challenge.NewMemoryStore(bareContext(t), challenge.WithMaxEntries(8))
	h := f.l3Handler(t, useStore(store, "memory"))
	long := "did:web:example.com:" + strings.Repeat("b", 1000)
	for i := range 100 {
		if rep := rpcCall(t, h, defaultHandshakePath, handshakeMsg(i, long), nil); rep.Status != http.StatusOK || rep.Error != nil {
			t.Fatalf("handshake %d: HTTP %d %s", i, rep.Status, rep.Raw)
		}
	}
	if n, m := store.Len(), store.SingleUses(); n != 0 || m != 0 {
		t.Fatalf("100 anonymous handshakes left %d records and %d markers in the store", n, m)
	}
	hr := doHandshake(t, h, defaultHandshakePath, f.agent, nil)
	sc := answer(t, f.agent, hr)
	if rep := rpcCall(t, h, defaultVerifyPath, verifyMsg(1, sc, f.jwt(t, nil)), nil); rep.Status != http.StatusOK || rep.Error != nil {
		t.Fatalf("verify after the flood: HTTP %d %s", rep.Status, rep.Raw)
	}
	if rep := rpcCall(t, h, defaultVerifyPath, verifyMsg(2, sc, f.jwt(t, nil)), nil); rep.code() != challenge.CodeReplay {
		t.Fatalf("second answer: %s", rep.Raw)
	}
}
