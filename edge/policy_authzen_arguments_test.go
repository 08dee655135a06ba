package edge

import (
	"bytes"
	"testing"

	"github.com/mcpi-edge/caddy-mcpi/edge/authzen"
)

// TestAuthZENGetsTheArgumentsAsWritten: the PDP decides on the values the
// upstream gets. Decoded and re-encoded, an integer beyond 64 bits was
// rounded (12345678901234567890123 became 1.2345678901234568e+22) and a
// lone surrogate became U+FFFD.
func TestAuthZENGetsTheArgumentsAsWritten(t *testing.T) {
	f := newFixture(t)
	pdp := newTestPDP(t)
	h, _ := obsHandler(t, nil, f, func(c *setup) {
		c.AuthZEN = &authzen.Config{URL: pdp.URL, AllowPrivate: true}
	})
	args := `{"amount": 1, "ref": 12345678901234567890123, "memo": "\ud800x", "big": 1e400}`
	res := polServe(t, h, polPost(rulesCall(1, "transfer", args), f.jwt(t, nil)), nil)
	if !res.called || !bytes.Contains(res.fwdBody, []byte(args)) {
		t.Fatalf("forwarded %t %s: HTTP %d %s", res.called, res.fwdBody, res.rec.Code, res.rec.Body)
	}
	for _, want := range []string{`"ref":12345678901234567890123`, `"memo":"\ud800x"`, `"big":1e400`} {
		if !bytes.Contains(pdp.lastBody(), []byte(want)) {
			t.Errorf("the PDP was sent %s, without %s", pdp.lastBody(), want)
		}
	}
}
