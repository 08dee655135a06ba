package integration

import (
	"bytes"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestPolicyAmbiguousAnswerWithheld, through Caddy:
// an answer to a ping or to a POST of notifications alone in which a
// case-folding client reads a tool list the filter did not read is
// withheld (-32603), and a plain tool list answering notifications is
// filtered.
func TestPolicyAmbiguousAnswerWithheld(t *testing.T) {
	shapes := map[string]string{
		"Result":       `"result":{},"Result":{"tools":[{"name":"files_write"}]}`,
		"error Result": `"error":{"code":1,"message":"x"},"Result":{"tools":[{"name":"files_write"}]}`,
		"result twice": `"result":{},"result":{"tools":[{"name":"files_write"}]}`,
		"Name only":    `"result":{"tools":[{"Name":"files_write"}]}`,
		"plain list":   `"result":{"tools":[{"name":"whoami"},{"name":"files_write"}]}`,
	}
	upstream := answerWith(func(id string, q url.Values) string {
		if id == "" {
			id = "3" // a server answering notifications anyway
		}
		return `{"jsonrpc":"2.0","id":` + id + `,` + shapes[q.Get("shape")] + `}`
	})
	h := startPolicyEdge(t, upstream, policyConfig)
	ctx := testContext(t)
	requests := map[string]struct{ body, id string }{
		"ping":         {`{"jsonrpc":"2.0","id":5,"method":"ping"}`, "5"},
		"notification": {`{"jsonrpc":"2.0","method":"notifications/initialized"}`, "null"},
	}
	for shape := range shapes {
		for rname, req := range requests {
			for _, sse := range []string{"", "1"} {
				t.Run(shape+" "+rname+" sse="+sse, func(t *testing.T) {
					h.upstream.Reset()
					path := "/mcp?shape=" + url.QueryEscape(shape) + "&sse=" + sse
					resp := postWithheld(ctx, t, h, path, req.body, http.Header{})
					if len(h.upstream.Requests()) != 1 {
						t.Fatalf("not forwarded: HTTP %d %s", resp.Status, resp.Body)
					}
					if bytes.Contains(resp.Body, []byte("files_write")) {
						t.Fatalf("BYPASS: the denied tool reached the agent: %s", resp.Body)
					}
					if shape == "plain list" {
						if rname == "notification" && !strings.Contains(string(resp.Body), `"tools":[{"name":"whoami"}]`) {
							t.Errorf("filtered list: HTTP %d %s", resp.Status, resp.Body)
						}
						return
					}
					if len(resp.Msgs) != 1 || resp.Msgs[0]["result"] != nil {
						t.Fatalf("HTTP %d %s, want one error", resp.Status, resp.Body)
					}
					if e, _ := resp.Msgs[0]["error"].(map[string]any); e["code"] != float64(-32603) {
						t.Errorf("error %v, want -32603: %s", e, resp.Body)
					}
					if !strings.Contains(string(resp.Body), `"id":`+req.id) {
						t.Errorf("want the error for id %s: %s", req.id, resp.Body)
					}
				})
			}
		}
	}
}
