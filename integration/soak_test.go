package integration

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// soakDuration is how long TestSoak drives the edge: 10s by default, so it
// fits in a normal `go test` run; MCPI_SOAK (a Go duration: MCPI_SOAK=60s,
// MCPI_SOAK=10m) lengthens it for a real soak before a release.
func soakDuration(t *testing.T) time.Duration {
	t.Helper()
	v := os.Getenv("MCPI_SOAK")
	if v == "" {
		return 10 * time.Second
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("MCPI_SOAK=%q: want a positive Go duration such as 60s", v)
	}
	return d
}

// soakKind is one kind of request of the soak mix and the answer it must
// get.
type soakKind struct {
	name   string
	weight int
	build  func() *http.Request
	status int
	// reason of a 401, description of a 413; "" for 200.
	reason, description string
}

// TestSoak drives a real Caddy with a mix of valid, replayed, invalid
// (bad signature), expired, credential-less, oversized-credential and
// oversized-body requests from 32 keep-alive clients for soakDuration, and
// checks that every answer is the right decision (no 5xx from the edge, no
// transport error), that the upstream saw exactly the admitted requests,
// stripped, and that Caddy's goroutines and RSS come back near their
// baseline afterwards (goroutines <= baseline+10 once connections are
// closed; RSS <= 2*baseline+50MiB, since Go returns freed memory to the OS
// lazily).
func TestSoak(t *testing.T) {
	const (
		workers     = 32
		maxCred     = 8 << 10
		maxBody     = 64 << 10
		freshTokens = 16
	)
	duration := soakDuration(t)
	port, adminPort := freePort(t), freePort(t)
	base := "http://127.0.0.1:" + strconv.Itoa(port)

	w := opsWorld(t, hostAudience(port))
	replayed := w.jwt(t)
	fresh := make([]string, freshTokens)
	for i := range fresh {
		fresh[i] = w.jwt(t)
	}
	badSig := tamper(w.jwt(t))
	expired := w.jwt(t, func(tm *vc.Template) {
		tm.NotBefore, tm.ExpiresAt = time.Now().Add(-2*time.Hour), time.Now().Add(-time.Hour)
	})
	// A well-formed, validly signed credential that is simply too big (a
	// long scope list): over max_credential_size, but under Caddy's own
	// 16KiB request header limit, which would answer 431 before the edge
	// runs.
	var oversized string
	for n := 100; len(oversized) <= maxCred+512; n += 10 {
		oversized = w.jwt(t, func(tm *vc.Template) {
			for i := range n {
				tm.Scopes = append(tm.Scopes, fmt.Sprintf("tool-%04d:execute", i))
			}
		})
	}
	if len(oversized) > 14<<10 {
		t.Fatalf("oversized credential is %d bytes, want between %d and 14KiB", len(oversized), maxCred)
	}
	bigBody := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"greet","arguments":{"name":"` +
		strings.Repeat("a", maxBody+(maxBody/2)) + `"}}}`)

	audit := &auditUpstream{secrets: append([]string{replayed, badSig, expired, oversized}, fresh...)}
	up := httptest.NewServer(audit)
	t.Cleanup(up.Close)

	dir := t.TempDir()
	caddyfile := opsGlobals(adminPort, dir, time.Second, "\tauto_https off\n") + fmt.Sprintf(`
:%d {
	bind 127.0.0.1
	mcpi {
		trust any
		max_credential_size %d
		max_body_size %d
	}
	reverse_proxy %s
}
`, port, maxCred, maxBody, up.Listener.Addr())
	tr := &http.Transport{MaxIdleConnsPerHost: workers}
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	e := startOpsEdge(t, dir, adminPort, caddyfile, answersHTTP(client, base+"/.well-known/oauth-protected-resource"))

	var freshN atomic.Uint64
	get := func(hdr ...string) *http.Request {
		req, _ := http.NewRequest(http.MethodGet, base+"/mcp", nil)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		return req
	}
	post := func(body []byte, hdr ...string) *http.Request {
		req, _ := http.NewRequest(http.MethodPost, base+"/mcp", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		return req
	}
	kinds := []soakKind{
		{name: "valid", weight: 4, status: http.StatusOK, build: func() *http.Request {
			return get("Authorization", "Bearer "+fresh[freshN.Add(1)%freshTokens])
		}},
		{name: "valid/body-carrier", weight: 2, status: http.StatusOK, build: func() *http.Request {
			return post([]byte(`{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{"delegationToken":"` + replayed + `"}}`))
		}},
		// Level 1 credentials are bearer tokens: the same one again is
		// simply valid again.
		{name: "replayed", weight: 4, status: http.StatusOK, build: func() *http.Request {
			return get("KYA-Delegation", replayed, "X-Agent-DID", "did:example:"+spoofMarker)
		}},
		{name: "bad-signature", weight: 3, status: http.StatusUnauthorized, reason: vc.Reason(vc.ErrSignature), build: func() *http.Request {
			return get("Authorization", "Bearer "+badSig)
		}},
		{name: "expired", weight: 2, status: http.StatusUnauthorized, reason: vc.Reason(vc.ErrExpired), build: func() *http.Request {
			return get("Authorization", "Bearer "+expired)
		}},
		{name: "no-credential", weight: 2, status: http.StatusUnauthorized, build: func() *http.Request {
			return get("X-User-DID", "did:example:"+spoofMarker)
		}},
		{name: "credential-too-large", weight: 1, status: http.StatusUnauthorized, reason: vc.Reason(vc.ErrTooLarge), build: func() *http.Request {
			return get("KYA-Delegation", oversized)
		}},
		{name: "body-too-large", weight: 1, status: http.StatusRequestEntityTooLarge, description: "request body too large", build: func() *http.Request {
			return post(bigBody, "Authorization", "Bearer "+replayed)
		}},
	}
	var mix []int // kind indexes, each as often as its weight
	for i, k := range kinds {
		for range k.weight {
			mix = append(mix, i)
		}
	}

	type tally struct{ sent, wrong, serverErr, transportErr atomic.Int64 }
	tallies := make([]tally, len(kinds))
	var (
		mu       sync.Mutex
		problems []string
		lat      []time.Duration
	)
	note := func(s string) {
		mu.Lock()
		if len(problems) < 10 {
			problems = append(problems, s)
		}
		mu.Unlock()
	}
	// check sends one request and judges the answer; it reports whether
	// the request was admitted (200).
	check := func(k int) bool {
		kind := kinds[k]
		tl := &tallies[k]
		tl.sent.Add(1)
		resp, err := client.Do(kind.build())
		if err != nil {
			tl.transportErr.Add(1)
			note(kind.name + ": " + err.Error())
			return false
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode >= 500 {
			tl.serverErr.Add(1)
		}
		ok := resp.StatusCode == kind.status
		if ok && kind.status != http.StatusOK {
			eb, isEdge := decodeEdgeError(body)
			ok = isEdge && eb.Reason == kind.reason && (kind.description == "" || strings.HasPrefix(eb.Description, kind.description))
		}
		if !ok {
			tl.wrong.Add(1)
			note(fmt.Sprintf("%s: HTTP %d %.200s", kind.name, resp.StatusCode, body))
		}
		return resp.StatusCode == http.StatusOK
	}

	// Warm up, then take the baseline with every connection closed.
	for i := range 2 * len(mix) {
		check(mix[i%len(mix)])
	}
	tr.CloseIdleConnections()
	up.CloseClientConnections()
	time.Sleep(300 * time.Millisecond)
	baseG, baseRSS := e.goroutines(), e.rss()
	tallies = make([]tally, len(kinds)) // count the soak only
	problems = nil
	servedBefore := audit.served.Load()

	ctx, cancel := context.WithTimeout(context.Background(), duration)
	defer cancel()
	var peakRSS atomic.Int64
	peakRSS.Store(baseRSS)
	var admitted atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() { // RSS sampler
		for ctx.Err() == nil {
			if r := e.rss(); r > peakRSS.Load() {
				peakRSS.Store(r)
			}
			select {
			case <-ctx.Done():
			case <-time.After(250 * time.Millisecond):
			}
		}
	})
	start := time.Now()
	for wi := range workers {
		wg.Go(func() {
			var mine []time.Duration
			for n := wi * 7; ctx.Err() == nil; n++ {
				t0 := time.Now()
				if check(mix[n%len(mix)]) {
					admitted.Add(1)
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	elapsed := time.Since(start)

	var total, wrong, serverErr, transportErr int64
	for i, k := range kinds {
		tl := &tallies[i]
		total += tl.sent.Load()
		wrong += tl.wrong.Load()
		serverErr += tl.serverErr.Load()
		transportErr += tl.transportErr.Load()
		t.Logf("%-22s %7d sent, %d wrong, %d 5xx, %d transport errors", k.name, tl.sent.Load(), tl.wrong.Load(), tl.serverErr.Load(), tl.transportErr.Load())
	}
	slices.Sort(lat)
	pct := func(p float64) time.Duration {
		if len(lat) == 0 {
			return 0
		}
		return lat[min(len(lat)-1, int(float64(len(lat))*p))].Round(10 * time.Microsecond)
	}
	t.Logf("%d requests in %v from %d clients: %.0f req/s; latency p50 %v, p99 %v, max %v",
		total, elapsed.Round(time.Millisecond), workers, float64(total)/elapsed.Seconds(), pct(0.5), pct(0.99), pct(1))

	if wrong != 0 || serverErr != 0 || transportErr != 0 {
		t.Errorf("%d wrong decisions, %d 5xx, %d transport errors; first: %q", wrong, serverErr, transportErr, problems)
	}
	for i, k := range kinds {
		if tallies[i].sent.Load() == 0 {
			t.Errorf("the mix never sent %s", k.name)
		}
	}
	if got := audit.served.Load() - servedBefore; got != admitted.Load() {
		t.Errorf("upstream served %d requests, the clients got %d 200s", got, admitted.Load())
	}
	if l := audit.leak(); l != "" {
		t.Errorf("upstream saw %s (%d requests)", l, audit.leaks.Load())
	}

	// Back to idle: close the client's keep-alive connections and the
	// upstream's side of Caddy's pooled ones, then let Caddy settle.
	tr.CloseIdleConnections()
	up.CloseClientConnections()
	// Wait (up to 5s) for the count to come back to about the baseline,
	// so the figure reported is the settled one; the bound is looser.
	afterG := e.settleGoroutines(baseG+2, 5*time.Second)
	afterRSS := e.rss()
	const mib = 1 << 20
	t.Logf("Caddy goroutines: %d baseline, %d after; RSS: %.1f MiB baseline, %.1f MiB peak, %.1f MiB after",
		baseG, afterG, float64(baseRSS)/mib, float64(peakRSS.Load())/mib, float64(afterRSS)/mib)
	if afterG > baseG+10 {
		t.Errorf("Caddy has %d goroutines after the soak, %d before", afterG, baseG)
	}
	if afterRSS > 2*baseRSS+50*mib {
		t.Errorf("Caddy's RSS is %.1f MiB after the soak, %.1f MiB before", float64(afterRSS)/mib, float64(baseRSS)/mib)
	}
}
