package integration

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// rawPost POSTs body as is (JSON content type, the MCP Accept header) with
// hdr added verbatim, for bodies json.Marshal cannot produce (duplicate
// members, batches with repeated ids, odd spellings).
func rawPost(ctx context.Context, t *testing.T, h *harness, path, body string, hdr http.Header) rpcResponse {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.base+path, bytes.NewReader([]byte(body)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range hdr {
		req.Header[k] = v
	}
	return h.do(req)
}

// rawExchange writes req to the edge over a fresh TCP connection and returns
// the status line's code (0 if the connection closed without an answer).
func rawExchange(t *testing.T, h *harness, req string) int {
	t.Helper()
	conn, err := net.DialTimeout("tcp", strings.TrimPrefix(h.base, "http://"), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, req); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return 0
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// TestWireSmuggledIdentityHeaders: identity headers smuggled at the HTTP/1.1 wire
// level, through the real Caddy at Level 2 in front of a recorder: an
// obs-folded continuation, a chunked request's trailers (declared and not),
// and CL+TE. None may put a forged value upstream; the edge's own values
// must be the only ones.
func TestWireSmuggledIdentityHeaders(t *testing.T) {
	var (
		mu       sync.Mutex
		trailers []http.Header
	)
	rec := &recorder{next: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The recorder read the body already, so r.Trailer holds what
		// arrived after it.
		mu.Lock()
		trailers = append(trailers, r.Trailer.Clone())
		mu.Unlock()
		w.WriteHeader(http.StatusOK)
	})}
	up := serveUpstream(t, rec)
	h := newEdgeHarness(t, rec)
	dir := t.TempDir()
	h.start(dir, testCaddyfile(freePort(t), filepath.Join(dir, "storage"), level2Site(h.port, up.Listener.Addr().String(), "level 2")))
	w := newWorld(t, h)
	tok := w.jwt(t)
	hostPort := strings.TrimPrefix(h.base, "http://")
	body := `{"jsonrpc":"2.0","id":1,"method":"ping"}`

	forgedArrived := func(t *testing.T) {
		t.Helper()
		for _, r := range rec.Requests() {
			// An obs-folded line joins the previous header's value (Go
			// unfolds it); only identity headers matter here.
			for _, k := range identityHeaders(r.Header) {
				for _, v := range r.Header[k] {
					if strings.Contains(v, "mallory") {
						t.Errorf("forged value reached the upstream in %s: %q", k, v)
					}
				}
			}
			_ = r
		}
		mu.Lock()
		defer mu.Unlock()
		for _, tr := range trailers {
			if names := identityHeaders(tr); len(names) > 0 {
				t.Errorf("identity trailers reached the upstream: %q", names)
			}
			if tr.Get("Authorization") != "" {
				t.Error("a credential trailer reached the upstream")
			}
		}
		for _, r := range rec.Requests() {
			if got := r.Header.Values("X-Agent-Did"); len(got) > 1 || (len(got) == 1 && got[0] != w.agent.did) {
				t.Errorf("X-Agent-DID upstream %q, want only %q", got, w.agent.did)
			}
		}
	}

	cases := map[string]string{
		"obs-fold": "POST /mcp HTTP/1.1\r\nHost: " + hostPort + "\r\nAuthorization: Bearer " + tok +
			"\r\nContent-Type: application/json\r\nX-Foo: a\r\n X-Agent-DID: did:key:mallory\r\nContent-Length: " +
			strconv.Itoa(len(body)) + "\r\nConnection: close\r\n\r\n" + body,
		"obs-fold of X-Agent-DID": "POST /mcp HTTP/1.1\r\nHost: " + hostPort + "\r\nAuthorization: Bearer " + tok +
			"\r\nContent-Type: application/json\r\nX-Agent-DID:\r\n did:key:mallory\r\nContent-Length: " +
			strconv.Itoa(len(body)) + "\r\nConnection: close\r\n\r\n" + body,
		"declared trailers": "POST /mcp HTTP/1.1\r\nHost: " + hostPort + "\r\nAuthorization: Bearer " + tok +
			"\r\nContent-Type: application/json\r\nTrailer: X-Agent-DID, X-User-DID, KYA-OS-Agent-DID, X_Agent_DID, X-Other\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n" +
			fmt.Sprintf("%x\r\n%s\r\n0\r\nX-Agent-DID: did:key:mallory\r\nX-User-DID: did:key:mallory\r\nKYA-OS-Agent-DID: did:key:mallory\r\nX_Agent_DID: did:key:mallory\r\nX-Other: ok\r\n\r\n", len(body), body),
		"undeclared trailers": "POST /mcp HTTP/1.1\r\nHost: " + hostPort + "\r\nAuthorization: Bearer " + tok +
			"\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n" +
			fmt.Sprintf("%x\r\n%s\r\n0\r\nX-Agent-DID: did:key:mallory\r\n\r\n", len(body), body),
		"CL and TE": "POST /mcp HTTP/1.1\r\nHost: " + hostPort + "\r\nAuthorization: Bearer " + tok +
			"\r\nContent-Type: application/json\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n" +
			fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(body), body) +
			"POST /mcp HTTP/1.1\r\nHost: " + hostPort + "\r\nX-Agent-DID: did:key:mallory\r\nContent-Length: 0\r\n\r\n",
		"credential in a trailer": "POST /mcp HTTP/1.1\r\nHost: " + hostPort +
			"\r\nContent-Type: application/json\r\nTrailer: Authorization\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n" +
			fmt.Sprintf("%x\r\n%s\r\n0\r\nAuthorization: Bearer %s\r\n\r\n", len(body), body, tok),
	}
	for name, req := range cases {
		t.Run(name, func(t *testing.T) {
			rec.Reset()
			mu.Lock()
			trailers = nil
			mu.Unlock()
			code := rawExchange(t, h, req)
			t.Logf("HTTP %d, upstream saw %d requests", code, len(rec.Requests()))
			forgedArrived(t)
			if name == "declared trailers" {
				// Control: trailers do cross Caddy, so the check above bites.
				mu.Lock()
				ok := len(trailers) == 1 && trailers[0].Get("X-Other") == "ok"
				mu.Unlock()
				if !ok {
					t.Errorf("control: the X-Other trailer did not reach the upstream")
				}
			}
			if name == "credential in a trailer" && len(rec.Requests()) > 0 {
				t.Errorf("a credential sent only in a trailer admitted the request (HTTP %d)", code)
			}
		})
	}
}

// TestConnectionHeaderKeepsIdentity: a client lists the edge's identity
// headers in its Connection header. reverse_proxy treats every name there
// as hop-by-hop and would delete the headers the edge set; the edge removes
// those names from Connection, so the upstream gets X-Agent-DID, X-User-DID
// and X-Verified-Delegation.
func TestConnectionHeaderKeepsIdentity(t *testing.T) {
	rec := &recorder{next: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) })}
	up := serveUpstream(t, rec)
	h := newEdgeHarness(t, rec)
	dir := t.TempDir()
	h.start(dir, testCaddyfile(freePort(t), filepath.Join(dir, "storage"), level2Site(h.port, up.Listener.Addr().String(), "level 2")))
	w := newWorld(t, h)
	resp := rawPost(testContext(t), t, h, "/mcp", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, http.Header{
		"Authorization": {"Bearer " + w.jwt(t)},
		"Connection":    {"X-Agent-DID, X-User-DID, X-Verified-Delegation"},
	})
	reqs := h.upstream.Requests()
	if resp.Status != http.StatusOK || len(reqs) != 1 {
		t.Fatalf("precondition: HTTP %d, %d upstream requests", resp.Status, len(reqs))
	}
	for _, k := range []string{"X-Agent-Did", "X-User-Did", "X-Verified-Delegation"} {
		if reqs[0].Header.Get(k) == "" {
			t.Errorf("admitted request reached the upstream without the edge's %s (dropped through Connection)", k)
		}
	}
}
