package integration

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/didresolver"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// didWebTimeout is the did_web_timeout of the fault edge. faultBound is
// how long a refusal caused by a broken issuer host may take: the timeout
// plus generous slack for a shared 2-core machine. A hung or huge document
// would take seconds (the fake hosts below stall for 10s or stream 64MiB),
// so staying under the bound shows the edge cut the fetch short.
const (
	didWebTimeout = 500 * time.Millisecond
	faultBound    = didWebTimeout + 4*time.Second
)

// didWebOf is the did:web of a host on 127.0.0.1:port.
func didWebOf(port int) string { return fmt.Sprintf("did:web:127.0.0.1%%3A%d", port) }

func portOf(srv *httptest.Server) int { return srv.Listener.Addr().(*net.TCPAddr).Port }

// hugeDoc streams a did.json far over the resolver's 64KiB cap: a valid
// JSON prefix, then filler until the client stops reading or 64MiB went
// out. written tells how much the edge let through before hanging up.
type hugeDoc struct {
	withLength bool
	written    atomic.Int64
}

func (h *hugeDoc) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	const total = 64 << 20
	w.Header().Set("Content-Type", "application/did+json")
	if h.withLength {
		w.Header().Set("Content-Length", strconv.Itoa(total))
	} else {
		w.(http.Flusher).Flush() // headers out now: chunked, no length
	}
	chunk := []byte(strings.Repeat(" ", 32<<10))
	copy(chunk, `{"id":"did:web:x","filler":"`)
	for sent := 0; sent < total; sent += len(chunk) {
		n, err := w.Write(chunk)
		h.written.Add(int64(n))
		if err != nil {
			return
		}
		chunk = []byte(strings.Repeat("a", 32<<10))
	}
}

// TestFaultDIDWebIssuer: a trusted did:web issuer whose host is down
// (connection refused), hangs (past did_web_timeout) or serves a document
// over the size cap gets the client a 401 with reason issuer_unresolved,
// within faultBound, without the upstream being contacted. The second
// request for the same issuer is answered as fast from the negative cache.
func TestFaultDIDWebIssuer(t *testing.T) {
	var slowHits atomic.Int32
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		slowHits.Add(1)
		select { // hang until the edge gives up (or 10s)
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	}))
	t.Cleanup(func() { slow.CloseClientConnections(); slow.Close() })
	hugeLen, hugeChunked := &hugeDoc{withLength: true}, &hugeDoc{}
	hugeLenSrv, hugeChunkedSrv := httptest.NewServer(hugeLen), httptest.NewServer(hugeChunked)
	t.Cleanup(func() {
		for _, s := range []*httptest.Server{hugeLenSrv, hugeChunkedSrv} {
			s.CloseClientConnections()
			s.Close()
		}
	})
	down := didWebOf(freePort(t)) // nothing listens there

	rec := &recorder{next: okUpstream}
	up := httptest.NewServer(rec)
	t.Cleanup(up.Close)

	cases := []struct {
		name  string
		did   string
		check func(t *testing.T, elapsed time.Duration)
	}{
		{"down", down, nil},
		{"slow", didWebOf(portOf(slow)), func(t *testing.T, elapsed time.Duration) {
			if slowHits.Load() == 0 {
				t.Error("the slow host was never asked: the refusal did not come from the timeout")
			}
			if elapsed < didWebTimeout*9/10 {
				t.Errorf("refused after %v, before did_web_timeout %v: not the timeout path", elapsed, didWebTimeout)
			}
		}},
		{"huge/content-length", didWebOf(portOf(hugeLenSrv)), func(t *testing.T, _ time.Duration) {
			t.Logf("host wrote %d bytes before the edge hung up", hugeLen.written.Load())
		}},
		{"huge/chunked", didWebOf(portOf(hugeChunkedSrv)), func(t *testing.T, _ time.Duration) {
			// The edge reads 64KiB+1; the rest of what got out sits in
			// socket buffers (a few MiB on loopback), far from 64MiB.
			n := hugeChunked.written.Load()
			t.Logf("host wrote %d bytes before the edge hung up", n)
			if n > 16<<20 {
				t.Errorf("the edge let the host stream %d bytes: the size cap does not stop the read", n)
			}
		}},
	}

	port, adminPort := freePort(t), freePort(t)
	dids := make([]string, 0, len(cases))
	for _, c := range cases {
		dids = append(dids, c.did)
	}
	dir := t.TempDir()
	caddyfile := opsGlobals(adminPort, dir, time.Second, "\tauto_https off\n") + fmt.Sprintf(`
:%d {
	bind 127.0.0.1
	mcpi {
		trust %s
		allow_private_did_web
		did_web_timeout %s
	}
	reverse_proxy %s
}
`, port, strings.Join(dids, " "), didWebTimeout, up.Listener.Addr())
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	client := &http.Client{Timeout: 20 * time.Second}
	startOpsEdge(t, dir, adminPort, caddyfile, answersHTTP(client, base+"/.well-known/oauth-protected-resource"))
	rec.Reset()

	w := opsWorld(t, hostAudience(port))
	signer, err := didresolver.GenerateKey(didresolver.Ed25519)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec.Reset()
			// Signed by a key the document would have to list; it is never
			// reached, since the document cannot be had.
			tok := issueJWT(t, signer, tc.did+"#key-1", w.template())
			for attempt, label := range []string{"first", "negative-cached"} {
				req, _ := http.NewRequest(http.MethodPost, base+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer "+tok)
				start := time.Now()
				resp, err := client.Do(req)
				if err != nil {
					t.Fatalf("%s request: %v", label, err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				elapsed := time.Since(start)
				t.Logf("%s request: HTTP %d after %v", label, resp.StatusCode, elapsed.Round(time.Millisecond))
				if resp.StatusCode != http.StatusUnauthorized {
					t.Fatalf("%s request: HTTP %d, want 401; body %s", label, resp.StatusCode, body)
				}
				if eb, ok := decodeEdgeError(body); !ok || eb.Reason != vc.Reason(vc.ErrIssuerUnresolved) {
					t.Errorf("%s request: body %s, want reason %s", label, body, vc.Reason(vc.ErrIssuerUnresolved))
				}
				if elapsed > faultBound {
					t.Errorf("%s request took %v, want at most %v (did_web_timeout %v)", label, elapsed, faultBound, didWebTimeout)
				}
				if attempt == 0 && tc.check != nil {
					tc.check(t, elapsed)
				}
			}
			if reqs := rec.Requests(); len(reqs) != 0 {
				t.Errorf("upstream saw %d requests", len(reqs))
			}
		})
	}
}

// defaultLogFilter is the global `log default` block that keeps the header
// carriers Caddy does not redact by itself out of its error log. Caddy logs
// a failed request (a 502, …) with its headers as they arrived: it clones
// the request for logging before any handler runs, so the mcpi handler
// removing the carriers does not reach that copy.
const defaultLogFilter = `	log default {
		output stderr
		format filter {
			wrap json
			request>headers>Kya-Delegation replace REDACTED
			request>headers>Kya-Os-Delegation-Credential replace REDACTED
			request>headers>Mcp-I-Credential replace REDACTED
			request>headers>Mcp-I-Delegation replace REDACTED
		}
	}
`

// TestFaultUpstreamDown: when the upstream does not answer, a verified
// request gets Caddy's plain 502, fast, and the response gives away neither
// the credential, nor the verified identity, nor the forged headers; an
// unverified one is still refused by the edge (401) before any dial.
//
// It also reads Caddy's error log entry for each 502, on an edge with
// Caddy's logging as shipped and on one with defaultLogFilter. As shipped,
// Caddy redacts Authorization but writes a credential sent in KYA-Delegation
// or MCP-I-Credential verbatim; the plain rows pin that (if they start
// failing, Caddy began redacting more and the operator docs can say so),
// and the filtered rows show the filter closes it.
func TestFaultUpstreamDown(t *testing.T) {
	w := opsWorld(t)
	for _, edge := range []struct {
		name     string
		globals  string
		filtered bool
	}{
		{"caddy-default-logging", "\tauto_https off\n", false},
		{"log-filter", "\tauto_https off\n" + defaultLogFilter, true},
	} {
		t.Run(edge.name, func(t *testing.T) {
			port, adminPort, dead := freePort(t), freePort(t), freePort(t)
			dir := t.TempDir()
			caddyfile := opsGlobals(adminPort, dir, time.Second, edge.globals) + fmt.Sprintf(`
:%d {
	bind 127.0.0.1
	mcpi {
		trust any
	}
	reverse_proxy 127.0.0.1:%d
}
`, port, dead)
			base := "http://127.0.0.1:" + strconv.Itoa(port)
			client := &http.Client{Timeout: 20 * time.Second}
			e := startOpsEdge(t, dir, adminPort, caddyfile, answersHTTP(client, base+"/.well-known/oauth-protected-resource"))

			tok := w.jwt(t, withAudiences(hostAudience(port)))
			secrets := []string{tok, w.agent.did, w.user.did, w.issuer.did, spoofMarker}
			cases := []struct {
				name   string
				hdr    http.Header
				status int
				// loggedAsShipped: Caddy's own logging writes the
				// credential into the 502 entry.
				loggedAsShipped bool
			}{
				{"verified/authorization", http.Header{"Authorization": {"Bearer " + tok}, "X-Agent-DID": {"did:example:mallory"}}, http.StatusBadGateway, false},
				{"verified/kya-delegation", http.Header{"KYA-Delegation": {tok}, "X-User-DID": {"did:example:mallory"}}, http.StatusBadGateway, true},
				{"verified/mcp-i-credential", http.Header{"MCP-I-Credential": {tok}}, http.StatusBadGateway, true},
				{"unverified/bad-signature", http.Header{"Authorization": {"Bearer " + tamper(tok)}}, http.StatusUnauthorized, false},
			}
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					before := len(e.out.String())
					req, _ := http.NewRequest(http.MethodPost, base+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
					req.Header.Set("Content-Type", "application/json")
					for k, v := range tc.hdr {
						req.Header[k] = v
					}
					start := time.Now()
					resp, err := client.Do(req)
					if err != nil {
						t.Fatal(err)
					}
					body, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if resp.StatusCode != tc.status {
						t.Fatalf("HTTP %d, want %d; body %s", resp.StatusCode, tc.status, body)
					}
					if elapsed := time.Since(start); elapsed > 5*time.Second {
						t.Errorf("answered after %v: a refused dial should fail fast", elapsed)
					}
					for i, s := range secrets {
						if strings.Contains(string(body), s) {
							t.Errorf("response body gives away secret #%d: %s", i, body)
						}
						for k, vs := range resp.Header {
							for _, v := range vs {
								if strings.Contains(v, s) {
									t.Errorf("response header %s gives away secret #%d", k, i)
								}
							}
						}
					}
					if tc.status != http.StatusBadGateway {
						return
					}
					logged := waitLogged(e.out, before, `"status":502`)
					if !strings.Contains(logged, `"status":502`) {
						t.Fatalf("no error log entry for the 502")
					}
					switch inLog := strings.Contains(logged, tok); {
					case edge.filtered && inLog:
						t.Errorf("the error log holds the credential despite the log filter")
					case !edge.filtered && inLog != tc.loggedAsShipped:
						t.Errorf("credential in Caddy's error log: %t, want %t (Caddy's redaction changed: update the operator docs)", inLog, tc.loggedAsShipped)
					}
				})
			}
		})
	}
}

// waitLogged returns Caddy's output after offset once it contains want (or
// after 2s): log lines are written a moment after the response.
func waitLogged(out *syncBuffer, offset int, want string) string {
	deadline := time.Now().Add(2 * time.Second)
	for {
		s := out.String()[offset:]
		if strings.Contains(s, want) || time.Now().After(deadline) {
			return s
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// reloadSite renders the edge of TestFaultReloadUnderLoad; generation
// changes a response header so the client can see which config answered.
func reloadSite(globals string, port int, upstream string, generation int) string {
	return globals + fmt.Sprintf(`
:%d {
	bind 127.0.0.1
	header X-Config-Generation %d
	mcpi {
		trust any
	}
	reverse_proxy %s
}
`, port, generation, upstream)
}

// keepAliveRace matches the errors a client gets when it reuses a
// keep-alive connection at the instant the server closes it as idle (a
// config being replaced does that to its connections): the request never
// reached a handler.
func keepAliveRace(err error) bool {
	s := err.Error()
	for _, m := range []string{"server closed idle connection", "connection reset by peer", "broken pipe", ": EOF"} {
		if strings.Contains(s, m) {
			return true
		}
	}
	return false
}

// listenerHandoff reports a connection reset while it was being made: on
// Linux a reload hands Caddy's listening socket over (SO_REUSEPORT), and a
// connection still queued on the socket that closes is reset before it is
// accepted. No request was sent on it, so no decision was made; Caddy's
// doing, not the handler's. Seen once in many runs.
func listenerHandoff(err error) bool {
	s := err.Error()
	return strings.Contains(s, "dial tcp") && strings.Contains(s, "connection reset by peer")
}

// TestFaultReloadUnderLoad: configs posted to the admin API's /load while
// valid and invalid requests keep coming change no decision: every answer
// is 200 from the upstream for a valid credential and 401 from the edge for
// an invalid one, the upstream sees exactly the admitted requests, stripped,
// and Caddy's goroutine count returns to where it was once the connections
// are closed.
//
// Half the clients send GET, half POST. GET must see no transport error at
// all: Go's client, like most, resends an idempotent request when the
// keep-alive connection it picked turns out to be closed. POST cannot be
// resent blindly, so when a replaced config closes its idle connections a
// POST that picked one at that instant fails. Such failures are accepted
// only as that race, and shown to come from the reloads: none in the first
// second (no reload yet, the control), each of the keep-alive kind, inside
// a reload's window, and at most one per POST client per reload. The
// upstream count proves none of them was half-processed.
func TestFaultReloadUnderLoad(t *testing.T) {
	const (
		workers  = 8 // even: GET, odd: POST
		duration = 3500 * time.Millisecond
		quiet    = time.Second // load without reloads first: the control
		every    = 500 * time.Millisecond
		// slack after a /load returned in which the old config may still
		// be closing connections.
		windowSlack = 500 * time.Millisecond
	)
	port, adminPort := freePort(t), freePort(t)
	dir := t.TempDir()
	// A real grace period: requests in flight on the old config finish
	// there instead of being cut when it stops.
	globals := opsGlobals(adminPort, dir, 5*time.Second, "\tauto_https off\n")

	w := opsWorld(t, hostAudience(port))
	valid := w.jwt(t)
	invalid := tamper(valid)
	audit := &auditUpstream{secrets: []string{valid, invalid}}
	up := httptest.NewServer(audit)
	t.Cleanup(up.Close)

	base := "http://127.0.0.1:" + strconv.Itoa(port)
	tr := &http.Transport{MaxIdleConnsPerHost: workers}
	client := &http.Client{Transport: tr, Timeout: 20 * time.Second}
	e := startOpsEdge(t, dir, adminPort, reloadSite(globals, port, up.Listener.Addr().String(), 1),
		answersHTTP(client, base+"/.well-known/oauth-protected-resource"))

	do := func(method, tok string) (status int, gen string, err error) {
		var body io.Reader
		if method == http.MethodPost {
			body = strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)
		}
		req, _ := http.NewRequest(method, base+"/mcp", body)
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := client.Do(req)
		if err != nil {
			return 0, "", err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("X-Config-Generation"), nil
	}
	// Warm up (the first verification, connection pools), then measure
	// with every connection closed.
	for range 20 {
		if _, _, err := do(http.MethodGet, valid); err != nil {
			t.Fatal(err)
		}
	}
	tr.CloseIdleConnections()
	up.CloseClientConnections()
	time.Sleep(300 * time.Millisecond)
	baseline := e.goroutines()
	servedBefore := audit.served.Load()

	type failure struct {
		at     time.Time
		method string
		err    error
	}
	var (
		ok, refused, wrong atomic.Int64
		mu                 sync.Mutex
		failures           []failure
		wrongs             []string
		gens               = map[string]int{}
		windows            [][2]time.Time // of each reload: /load sent, answered
	)
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), duration)
	defer cancel()
	var wg sync.WaitGroup
	for i := range workers {
		method := http.MethodGet
		if i%2 == 1 {
			method = http.MethodPost
		}
		wg.Go(func() {
			for n := i / 2; ctx.Err() == nil; n++ {
				tok, want := valid, http.StatusOK
				if n%2 == 1 {
					tok, want = invalid, http.StatusUnauthorized
				}
				status, gen, err := do(method, tok)
				mu.Lock()
				switch {
				case err != nil:
					failures = append(failures, failure{time.Now(), method, err})
				case status != want:
					wrong.Add(1)
					if len(wrongs) < 5 {
						wrongs = append(wrongs, fmt.Sprintf("%s: got %d, want %d", method, status, want))
					}
				case want == http.StatusOK:
					ok.Add(1)
				default:
					refused.Add(1)
				}
				if gen != "" {
					gens[gen]++
				}
				mu.Unlock()
			}
		})
	}
	time.Sleep(quiet)
	for gen := 2; ctx.Err() == nil; gen++ {
		sent := time.Now()
		if err := e.load(reloadSite(globals, port, up.Listener.Addr().String(), gen)); err != nil {
			t.Errorf("reload %d: %v", gen, err)
		}
		mu.Lock()
		windows = append(windows, [2]time.Time{sent, time.Now()})
		mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(every):
		}
	}
	wg.Wait()
	reloads := len(windows)

	var posts, handoffs int
	for _, f := range failures {
		at := f.at.Sub(start).Round(time.Millisecond)
		inWindow := false
		for _, win := range windows {
			if !f.at.Before(win[0]) && !f.at.After(win[1].Add(windowSlack)) {
				inWindow = true
			}
		}
		switch {
		case listenerHandoff(f.err) && inWindow:
			// Refused while connecting: no request was sent (see
			// listenerHandoff), whatever its method.
			handoffs++
		case f.method == http.MethodGet:
			t.Errorf("GET failed at %v: %v (an idempotent request must survive a reload)", at, f.err)
		case !keepAliveRace(f.err):
			t.Errorf("POST failed at %v with %v: not the keep-alive race of a reload", at, f.err)
		case !inWindow:
			t.Errorf("POST failed at %v with %v, outside every reload window", at, f.err)
		default:
			posts++
		}
	}
	t.Logf("%d reloads during %v: %d valid → 200, %d invalid → 401, %d wrong; %d POSTs hit the reloads' keep-alive race, %d connections were reset while connecting; responses per config generation %v",
		reloads, duration, ok.Load(), refused.Load(), wrong.Load(), posts, handoffs, gens)
	if handoffs > reloads {
		t.Errorf("%d connections reset while connecting over %d reloads: more than the listener hand-offs explain", handoffs, reloads)
	}
	if wrong.Load() != 0 {
		t.Errorf("%d wrong decisions across reloads; first: %q", wrong.Load(), wrongs)
	}
	if posts > reloads*workers/2 {
		t.Errorf("%d POSTs failed over %d reloads: more than one per POST client per reload", posts, reloads)
	}
	if reloads < 3 || len(gens) < 2 {
		t.Errorf("%d reloads, answers from %d config generations: the reloads did not happen under load", reloads, len(gens))
	}
	if ok.Load() == 0 || refused.Load() == 0 {
		t.Errorf("the load sent no valid or no invalid request")
	}
	if got := audit.served.Load() - servedBefore; got != ok.Load() {
		t.Errorf("upstream served %d requests, the clients got %d 200s: a refused or failed request reached it", got, ok.Load())
	}
	if l := audit.leak(); l != "" {
		t.Errorf("upstream saw %s (%d requests)", l, audit.leaks.Load())
	}

	tr.CloseIdleConnections()
	up.CloseClientConnections()
	after := e.settleGoroutines(baseline+2, 5*time.Second)
	t.Logf("Caddy goroutines: %d before the load, %d after (connections closed)", baseline, after)
	if after > baseline+10 {
		t.Errorf("Caddy has %d goroutines after %d reloads, %d before: old configs leak goroutines", after, reloads, baseline)
	}
}
