package identity

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/mcpi-edge/caddy-mcpi/internal/duration"
)

// TestUpstreamProbeVerdicts: what counts as a declaration.
func TestUpstreamProbeVerdicts(t *testing.T) {
	tests := []struct {
		name    string
		handler http.HandlerFunc
		want    bool
	}{
		{"document", func(w http.ResponseWriter, _ *http.Request) {
			_, _ = w.Write([]byte(`{"mcp_i":{"version":"2.0.0"}}`))
		}, true},
		{"header on 404", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("MCP-I-Version", "2.0.0")
			http.NotFound(w, r)
		}, true},
		{"404", http.NotFound, false},
		{"not JSON", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("<html>")) }, false},
		{"no mcp_i", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(`{"version":"2.0.0"}`)) }, false},
		{"mcp_i not an object", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(`{"mcp_i":true}`)) }, false},
		// Read strictly: an MCP-I client may read these otherwise.
		{"mcp_i then MCP_I false", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(`{"mcp_i":{},"MCP_I":false}`)) }, false},
		{"lone MCP_I", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(`{"MCP_I":{}}`)) }, false},
		{"trailing data", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(`{"mcp_i":{}} x`)) }, false},
		{"redirect", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "https://elsewhere.example.com/.well-known/mcp-i.json", http.StatusFound)
		}, false},
		{"too large", func(w http.ResponseWriter, _ *http.Request) {
			_, _ = w.Write([]byte(`{"mcp_i":{},"pad":"` + strings.Repeat("x", maxProbeDocument) + `"}`))
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up := httptest.NewServer(tt.handler)
			defer up.Close()
			origin, err := ParseUpstreamOrigin(up.URL)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var wg sync.WaitGroup
			p := newUpstreamProbe(ctx, &wg, origin, time.Minute, zap.NewNop())
			got, err := p.fetch()
			if got != tt.want {
				t.Errorf("declared = %t (err %v), want %t", got, err, tt.want)
			}
		})
	}
}

func TestReputationSource(t *testing.T) {
	var hits atomic.Int32
	// The slow endpoint answers only when the test ends, so the lookup
	// must give up by its own timeout, however busy the machine is.
	release := make(chan struct{})
	rep := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		switch did := r.URL.Query().Get("did"); {
		case strings.HasSuffix(did, "fraction"):
			_, _ = w.Write([]byte(`{"score": 0.875}`))
		case strings.HasSuffix(did, "broken"):
			http.Error(w, "down", http.StatusInternalServerError)
		case strings.HasSuffix(did, "garbage"):
			_, _ = w.Write([]byte(`{"score": "high"}`))
		case strings.HasSuffix(did, "twice"):
			_, _ = w.Write([]byte(`{"score": 90, "Score": 10}`))
		case strings.HasSuffix(did, "slow"):
			<-release
			_, _ = w.Write([]byte(`{"score": 10}`))
		default:
			_, _ = w.Write([]byte(`{"score": 42}`))
		}
	}))
	defer rep.Close()
	defer close(release) // before Close, which waits for the handler
	src, err := newReputationSource(context.Background(), &ReputationConfig{
		Scores:   map[string]float64{"did:web:static.example.com": 99.5},
		Endpoint: rep.URL + "/score?did={did}",
		Timeout:  duration.Duration(2 * time.Second),
	}, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for did, want := range map[string]string{
		"did:web:static.example.com": "99.5",
		"did:web:agent.example.com":  "42",
		"did:example:fraction":       "87.5",
		"did:example:broken":         "",
		"did:example:garbage":        "",
		"did:example:twice":          "",
		"did:example:slow":           "",
	} {
		type answer struct {
			score string
			ok    bool
		}
		done := make(chan answer, 1)
		go func() {
			got, ok := src.score(ctx, did)
			done <- answer{got, ok}
		}()
		select {
		case a := <-done:
			if a.score != want || a.ok != (want != "") {
				t.Errorf("score(%s) = %q %t, want %q", did, a.score, a.ok, want)
			}
		case <-time.After(time.Minute):
			t.Fatalf("score(%s) did not give up at its timeout", did)
		}
	}
	// Cached, failures included.
	n := hits.Load()
	for _, did := range []string{"did:web:agent.example.com", "did:example:broken"} {
		_, _ = src.score(ctx, did)
	}
	if hits.Load() != n {
		t.Errorf("cached lookups hit the endpoint again (%d → %d)", n, hits.Load())
	}

	for in, want := range map[string]float64{"87": 87, "0.87": 87, "1": 1, "1.0": 100, "0": 0, "100": 100, "55.555": 55.56} {
		if got, err := ParseReputationScore(in); err != nil || got != want {
			t.Errorf("ParseReputationScore(%q) = %v %v, want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"-1", "100.5", "NaN", "Inf", "x", ""} {
		if _, err := ParseReputationScore(in); err == nil {
			t.Errorf("ParseReputationScore(%q) accepted", in)
		}
	}
}

// TestReadStrictly: the upstream's mcp-i.json and a reputation answer are
// read with the strict reader: repeated or case-folded member names,
// trailing data and values of the wrong type count as no answer.
func TestReadStrictly(t *testing.T) {
	for doc, want := range map[string]bool{
		`{"mcp_i":{"version":"2.0.0"}}`: true,
		` {"mcp_i":{},"other":[1]} `:    true,
		`{"mcp_i":{},"mcp_i":{}}`:       false,
		`{"mcp_i":{},"Mcp_I":{}}`:       false,
		`{"MCP_I":{}}`:                  false,
		`{"mcp_i":{"a":1,"A":2}}`:       false,
		`{"mcp_i":{}}{}`:                false,
		`{"mcp_i":"{}"}`:                false,
		`{"mcp_i":null}`:                false,
		`[{"mcp_i":{}}]`:                false,
		`{"mcp_i":{}`:                   false,
		"{\"mcp_i\":{},\"x\":\"\xff\"}": true,
	} {
		if got := declaresMCPI([]byte(doc)); got != want {
			t.Errorf("declaresMCPI(%s) = %t, want %t", doc, got, want)
		}
	}
	for doc, want := range map[string]string{
		`{"score":42}`:             "42",
		`{"score":-1.5e1,"x":"y"}`: "-1.5e1",
		`{"score":42,"score":43}`:  "",
		`{"score":42,"SCORE":43}`:  "",
		`{"Score":42}`:             "",
		`{"score":42} {"score":1}`: "",
		`{"score":"42"}`:           "",
		`{"score":null}`:           "",
		`{"score":true}`:           "",
		`{"score":[42]}`:           "",
		`{}`:                       "",
		`42`:                       "",
	} {
		got, err := reputationScore([]byte(doc))
		if got != want || (err == nil) != (want != "") {
			t.Errorf("reputationScore(%s) = %q %v, want %q", doc, got, err, want)
		}
	}
}

func FuzzReputationScore(f *testing.F) {
	f.Add(`{"score":42}`)
	f.Add(`{"score":1,"Score":2}`)
	f.Fuzz(func(t *testing.T, doc string) {
		score, err := reputationScore([]byte(doc))
		if err != nil {
			return
		}
		// What the edge read is what encoding/json reads.
		var v struct{ Score json.Number }
		if json.Unmarshal([]byte(doc), &v) != nil || v.Score.String() != score {
			t.Fatalf("%q: score %q, encoding/json %q", doc, score, v.Score)
		}
	})
}

func FuzzDeclaresMCPI(f *testing.F) {
	f.Add(`{"mcp_i":{"version":"2.0.0"}}`)
	f.Add(`{"mcp_i":{},"MCP_I":1}`)
	f.Fuzz(func(t *testing.T, doc string) {
		if !declaresMCPI([]byte(doc)) {
			return
		}
		var v struct {
			MCPI json.RawMessage `json:"mcp_i"`
		}
		if json.Unmarshal([]byte(doc), &v) != nil || len(v.MCPI) == 0 || v.MCPI[0] != '{' {
			t.Fatalf("%q declared, but encoding/json reads mcp_i %s", doc, v.MCPI)
		}
	})
}
