package edge

import (
	"fmt"
	"net/http"
	"slices"
	"testing"

	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// annFillHosts is how many made-up sites a caller lists tools at to fill
// the learned annotations: each list teaches len(annTools) tools, and all
// sites together keep 4096 (docs/config/rules.md).
const annFillHosts = 4096/8 + 88

// TestToolAnnotationsFilledByOtherHosts: a caller listing tools under many
// made-up Host headers (as on a catch-all site) cannot keep a real site's
// annotations from being learned: its next tools/list teaches them again,
// and its calls are decided on them.
func TestToolAnnotationsFilledByOtherHosts(t *testing.T) {
	if len(annTools) != 8 {
		t.Fatalf("annFillHosts assumes 8 listed tools, not %d", len(annTools))
	}
	f := newFixture(t)
	h := annHandler(t, f, nil)
	// No audience: accepted at every Host.
	tok := f.jwt(t, func(tm *vc.Template) { tm.Scopes, tm.Audience = []string{"ro:read"}, nil })
	for i := range annFillHosts {
		r := polPost(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, tok)
		r.Host = fmt.Sprintf("junk%d.example", i)
		if res := polServe(t, h, r, annListReply); res.rec.Code != http.StatusOK {
			t.Fatalf("tools/list at %s: HTTP %d %s", r.Host, res.rec.Code, res.rec.Body)
		}
	}
	if fwd, _ := annCall(t, h, tok, "lookup"); fwd {
		t.Fatal("lookup allowed before " + testHost + " listed its tools")
	}
	if names := annList(t, h, tok); !slices.Contains(names, "lookup") || slices.Contains(names, "wipe") {
		t.Fatalf("tools/list at %s after the fill shows %v, want lookup (read-only) and not wipe", testHost, names)
	}
	if fwd, m := annCall(t, h, tok, "lookup"); !fwd {
		t.Fatalf("lookup after %s's own tools/list, with the store filled by other sites: %+v", testHost, m.Error)
	}
	if fwd, _ := annCall(t, h, tok, "wipe"); fwd {
		t.Fatal("wipe (destructive) allowed to ro:read")
	}
}

// TestToolAnnotationsNotLearnedFromAnonymousLists: an anonymous caller's
// tools/list teaches nothing, so it cannot spend the bound on the learned
// sites; a credentialed caller's own list still does.
func TestToolAnnotationsNotLearnedFromAnonymousLists(t *testing.T) {
	f := newFixture(t)
	h := annHandler(t, f, func(c *setup) {
		c.Tools = append(c.Tools, ToolPolicy{Name: "public", AllowAnonymous: true})
	})
	res := polServe(t, h, polPost(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, ""), annListReply)
	if !res.called || res.rec.Code != http.StatusOK {
		t.Fatalf("anonymous tools/list: forwarded %t, HTTP %d %s", res.called, res.rec.Code, res.rec.Body)
	}
	ro := f.jwt(t, func(tm *vc.Template) { tm.Scopes = []string{"ro:read"} })
	if fwd, _ := annCall(t, h, ro, "lookup"); fwd {
		t.Fatal("a class learned from an anonymous tools/list decided a call")
	}
	annList(t, h, ro)
	if fwd, m := annCall(t, h, ro, "lookup"); !fwd {
		t.Fatalf("lookup after a credentialed tools/list: %+v", m.Error)
	}
}
