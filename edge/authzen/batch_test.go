package authzen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/internal/duration"
)

// listRequests are the list-time questions for tools.
func listRequests(tools ...string) []*Request {
	var out []*Request
	for _, tl := range tools {
		out = append(out, &Request{Subject: Entity{Type: "agent", ID: "did:key:zA"}, Action: Action{Name: "tools/list"},
			Resource: Entity{Type: "mcp_tool", ID: tl}, Context: map[string]any{"request": map[string]any{"host": "h"}}})
	}
	return out
}

// batchPDP answers evaluations by handler; single evaluations allow
// everything but "secret". It counts both kinds.
func batchPDP(t *testing.T, batch http.HandlerFunc) (*httptest.Server, *atomic.Int32, *atomic.Int32) {
	var nb, ns atomic.Int32
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case EvaluationPath + "s":
			nb.Add(1)
			batch(w, r)
		case EvaluationPath:
			ns.Add(1)
			var req Request
			_ = json.NewDecoder(r.Body).Decode(&req)
			answer(fmt.Sprintf(`{"decision":%t}`, req.Resource.ID != "secret"))(w, r)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(s.Close)
	return s, &nb, &ns
}

func decisions(rs []Result) string {
	var b strings.Builder
	for _, r := range rs {
		switch {
		case r.Err != nil:
			b.WriteString("E")
		case r.Allowed:
			b.WriteString("+")
		default:
			b.WriteString("-")
		}
	}
	return b.String()
}

func TestEvaluateEachBatch(t *testing.T) {
	var got map[string]any
	s, nb, ns := batchPDP(t, func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewDecoder(r.Body).Decode(&got)
		answer(`{"evaluations":[{"decision":true},{"decision":false},{"decision":true}]}`)(w, r)
	})
	cl := client(t, Config{URL: s.URL, AllowPrivate: true, CacheTTL: duration.Duration(time.Minute)})
	if d := decisions(cl.EvaluateEach(context.Background(), listRequests("a", "b", "c"))); d != "+-+" {
		t.Fatalf("decisions %s, want +-+", d)
	}
	want := `{"action":{"name":"tools/list"},"context":{"request":{"host":"h"}},"evaluations":[{"resource":{"id":"a","type":"mcp_tool"}},{"resource":{"id":"b","type":"mcp_tool"}},{"resource":{"id":"c","type":"mcp_tool"}}],"subject":{"id":"did:key:zA","type":"agent"}}`
	if b, _ := json.Marshal(got); string(b) != want {
		t.Errorf("PDP got %s\nwant %s", b, want)
	}
	// Cached: the same list asks nothing; a single evaluation of the same
	// question is answered from the batch's decisions.
	cl.EvaluateEach(context.Background(), listRequests("a", "b", "c"))
	if d, cached, err := cl.Evaluate(context.Background(), listRequests("b")[0]); err != nil || d.Allowed || !cached {
		t.Errorf("single evaluation of b: %+v cached=%t %v", d, cached, err)
	}
	if nb.Load() != 1 || ns.Load() != 0 {
		t.Errorf("%d batches and %d single evaluations, want 1 and 0", nb.Load(), ns.Load())
	}
}

func TestEvaluateEachFailsClosed(t *testing.T) {
	for _, tc := range []struct {
		name, answer, want string
	}{
		{"fewer answers", `{"evaluations":[{"decision":true}]}`, "+EE"},
		{"not an array", `{"evaluations":{"decision":true}}`, "EEE"},
		{"no evaluations", `{"decision":true}`, "EEE"},
		{"a malformed item", `{"evaluations":[{"decision":true},{"decision":"yes"},{"decision":true}]}`, "EEE"},
		{"repeated member", `{"evaluations":[],"Evaluations":[{"decision":true},{"decision":true},{"decision":true}]}`, "EEE"},
		{"not JSON", `evaluations`, "EEE"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _, ns := batchPDP(t, answer(tc.answer))
			cl := client(t, Config{URL: s.URL, AllowPrivate: true})
			if d := decisions(cl.EvaluateEach(context.Background(), listRequests("a", "b", "c"))); d != tc.want {
				t.Errorf("decisions %s, want %s", d, tc.want)
			}
			if ns.Load() != 0 {
				t.Errorf("a malformed batch answer fell back to %d single evaluations", ns.Load())
			}
		})
	}
	// A PDP that does not answer in time: no decision, within the timeout.
	s, _, _ := batchPDP(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(2 * time.Second):
		}
	})
	cl := client(t, Config{URL: s.URL, AllowPrivate: true, Timeout: duration.Duration(200 * time.Millisecond)})
	start := time.Now()
	rs := cl.EvaluateEach(context.Background(), listRequests("a", "b"))
	if decisions(rs) != "EE" || !errors.Is(rs[0].Err, ErrPDP) || time.Since(start) > 2*time.Second {
		t.Errorf("a silent PDP: %s %v after %s", decisions(rs), rs[0].Err, time.Since(start))
	}
	// Past MaxEach, no decision.
	many := make([]string, MaxEach+1)
	for i := range many {
		many[i] = fmt.Sprint("t", i)
	}
	s, _, _ = batchPDP(t, func(w http.ResponseWriter, r *http.Request) {
		var req batchRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		answer(`{"evaluations":[`+strings.TrimSuffix(strings.Repeat(`{"decision":true},`, len(req.Evaluations)), ",")+`]}`)(w, r)
	})
	// A generous timeout: MaxEach+1 evaluations under -race on a loaded
	// machine may take longer than the default.
	rs = client(t, Config{URL: s.URL, AllowPrivate: true, Timeout: duration.Duration(30 * time.Second)}).EvaluateEach(context.Background(), listRequests(many...))
	if d := decisions(rs); d != strings.Repeat("+", MaxEach)+"E" {
		t.Errorf("past MaxEach: %s…", d[len(d)-3:])
	}
}

// TestEvaluateEachWithoutBatchEndpoint: a PDP without the Access
// Evaluations endpoint is asked per tool, and not at the batch endpoint
// again.
func TestEvaluateEachWithoutBatchEndpoint(t *testing.T) {
	s, nb, ns := batchPDP(t, func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) })
	cl := client(t, Config{URL: s.URL, AllowPrivate: true})
	for range 2 {
		if d := decisions(cl.EvaluateEach(context.Background(), listRequests("a", "secret", "c"))); d != "+-+" {
			t.Fatalf("decisions %s, want +-+", d)
		}
	}
	if nb.Load() != 1 || ns.Load() != 6 {
		t.Errorf("%d batch and %d single requests, want 1 and 6", nb.Load(), ns.Load())
	}
	// An evaluation URL of another path has no known batch endpoint.
	s2, nb2, _ := batchPDP(t, answer(`{"evaluations":[]}`))
	cl2 := client(t, Config{URL: s2.URL + "/custom/decide", AllowPrivate: true})
	_ = cl2.EvaluateEach(context.Background(), listRequests("a"))
	if nb2.Load() != 0 {
		t.Error("a PDP at a custom path was asked at /access/v1/evaluations")
	}
}

func TestParseBatchAnswerMalformed(t *testing.T) {
	for _, body := range []string{
		``, `[]`, `{}`, `{"evaluations":null}`, `{"evaluations":{}}`, `{"evaluations":[1]}`, `{"evaluations":[null]}`,
		`{"evaluations":[],"evaluations":[]}`, `{"evaluations":[{"decision":true}`,
		// Member names in another letter case, at either level.
		`{"Evaluations":[{"decision":true}]}`, `{"evaluations":[{"Decision":true}]}`, `{"evaluations":[{"deciſion":true}]}`,
	} {
		if ds, err := ParseBatchAnswer([]byte(body)); !errors.Is(err, ErrAnswer) {
			t.Errorf("ParseBatchAnswer(%q) = %+v, %v; want ErrAnswer", body, ds, err)
		}
	}
}

func FuzzParseBatchAnswer(f *testing.F) {
	for _, s := range []string{`{"Evaluations":[{"decision":true}]}`, `{"evaluations":[{"Decision":true}]}`, `{"evaluations":[{"decision":true},{"decision":false,"context":{"reason_user":{"en":"no"}}}]}`,
		`{"evaluations":[]}`, `{"evaluations":null}`, `{"evaluations":[1]}`, `{"evaluations":[{"decision":true}],"evaluations":[]}`, `[]`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		ds, err := ParseBatchAnswer([]byte(body))
		if err == nil {
			for _, d := range ds {
				if !d.Allowed && strings.ContainsAny(d.Reason, "\n\r") {
					t.Fatalf("reason %q", d.Reason)
				}
			}
		}
		if err != nil && !errors.Is(err, ErrAnswer) {
			t.Fatalf("error %v does not wrap ErrAnswer", err)
		}
	})
}
