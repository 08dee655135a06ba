package edge

import (
	"io"
	"net/http"
	"strconv"
	"testing"
)

// A checked answer goes on with the Content-Length of what is sent: the
// upstream's when it is exactly that (the answer unchanged), else the
// length of the body sent (rewritten, or a wrong or odd upstream value).
func TestResponseFilterContentLength(t *testing.T) {
	f := newFixture(t)
	h := f.handler(t, nil) // no tool policy: the default action and elicitation checks
	tok := f.jwt(t, nil)
	const answer = `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"hi"}]}}`
	exact := strconv.Itoa(len(answer))
	for _, tc := range []struct {
		name     string
		upstream []string
	}{
		{"exact", []string{exact}},
		{"none", nil},
		{"wrong", []string{"999"}},
		{"leading zero", []string{"0" + exact}},
		{"plus sign", []string{"+" + exact}},
		{"twice", []string{exact, exact}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := polServe(t, h, polPost(toolsCallBody, tok), func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.Header()["Content-Length"] = tc.upstream
				_, _ = io.WriteString(w, answer)
			})
			if res.rec.Code != http.StatusOK || res.rec.Body.String() != answer {
				t.Fatalf("HTTP %d %s", res.rec.Code, res.rec.Body)
			}
			if got := res.rec.Header().Values("Content-Length"); len(got) != 1 || got[0] != exact {
				t.Errorf("Content-Length %q, want [%s]", got, exact)
			}
		})
	}
}
