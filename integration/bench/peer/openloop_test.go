package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// runOpenLoop runs the openloop mode against url and decodes its line.
func runOpenLoop(t *testing.T, url string, args ...string) OpenLoopResult {
	t.Helper()
	cred := filepath.Join(t.TempDir(), "cred")
	if err := os.WriteFile(cred, []byte("tok\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := openLoop(append([]string{"-url", url, "-cred", cred}, args...), &out); err != nil {
		t.Fatal(err)
	}
	var res OpenLoopResult
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	return res
}

// TestOpenLoop drives a local server at a modest rate and checks the
// counts and what every request carried; never a timing.
func TestOpenLoop(t *testing.T) {
	var got, bad atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Add(1)
		var body bytes.Buffer
		_, _ = body.ReadFrom(r.Body)
		if r.Method != http.MethodPost || r.Header.Get("Authorization") != "Bearer tok" ||
			!strings.Contains(body.String(), `"method":"tools/call"`) {
			bad.Add(1)
		}
		_, _ = w.Write([]byte(Result))
	}))
	defer srv.Close()

	res := runOpenLoop(t, srv.URL+"/a/mcp", "-rate", "200", "-d", "500ms", "-conns", "4")
	if res.Requests == 0 || res.Requests != got.Load() {
		t.Errorf("requests: driver %d, server %d", res.Requests, got.Load())
	}
	if bad.Load() != 0 {
		t.Errorf("%d requests were not the bench's tools/call with the credential", bad.Load())
	}
	if res.Errors != 0 || res.Status["200"] != int(res.Requests) {
		t.Errorf("errors %d (%s), statuses %v", res.Errors, res.FirstError, res.Status)
	}
	if res.Connections < 1 || res.Connections > 4 {
		t.Errorf("connections: %d, want 1 to 4 (keep-alive, -conns 4)", res.Connections)
	}
	if !(res.P50us > 0 && res.P50us <= res.P90us && res.P90us <= res.P99us && res.P99us <= res.P999us && res.P999us <= res.MaxUS) {
		t.Errorf("percentiles out of order: %+v", res)
	}
	if res.Rate != 200 || res.Vegeta == "" {
		t.Errorf("rate %d, vegeta %q", res.Rate, res.Vegeta)
	}
}

// TestOpenLoopCountsWrongAnswers: a 200 with another body, and another
// status, are errors.
func TestOpenLoopCountsWrongAnswers(t *testing.T) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1)%2 == 0 {
			http.Error(w, "no", http.StatusForbidden)
			return
		}
		_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"x"}}`))
	}))
	defer srv.Close()
	res := runOpenLoop(t, srv.URL+"/b/mcp", "-rate", "100", "-d", "200ms")
	if res.Requests == 0 || res.Errors != res.Requests || res.FirstError == "" {
		t.Errorf("requests %d, errors %d, first %q: want every request an error", res.Requests, res.Errors, res.FirstError)
	}
}

func TestRank(t *testing.T) {
	xs := make([]time.Duration, 1000)
	for i := range xs {
		xs[i] = time.Duration(i + 1)
	}
	for q, want := range map[float64]time.Duration{0.5: 500, 0.9: 900, 0.99: 990, 0.999: 999, 1: 1000, 0: 1} {
		if got := rank(xs, q); got != want {
			t.Errorf("rank(1..1000, %v) = %d, want %d", q, got, want)
		}
	}
	if got := rank([]time.Duration{7}, 0.999); got != 7 {
		t.Errorf("rank of one = %d", got)
	}
}
