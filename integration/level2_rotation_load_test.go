package integration

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/mcpiverify"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// TestLevel2RotateUnderLoad: `caddy mcpi rotate-key` while two Caddy
// replicas sharing the key storage serve a steady stream of requests to an
// upstream that checks every X-Verified-Delegation with mcpiverify, and
// while someone floods the upstream with assertions of unknown kids (each
// makes mcpiverify want to refetch the JWKS, which it does at most once per
// refetch interval). The new key is published key_publish_delay before it
// signs, longer than the verifier's refetch interval, so not one request
// fails verification upstream, and the new key does sign in the end.
func TestLevel2RotateUnderLoad(t *testing.T) {
	const refetch = 2 * time.Second
	storage := t.TempDir()
	// The verifier needs the edge's address, known once the edge runs.
	var verifier atomic.Pointer[mcpiverify.Verifier]
	rec, up := newRecordedUpstream(t, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if v := verifier.Load(); v != nil {
				v.Wrap(next).ServeHTTP(w, r)
				return
			}
			http.Error(w, "no verifier yet", http.StatusServiceUnavailable)
		})
	})
	upstreamOrigin := up.URL
	cfg := "level 2\nedge_did did:web:edge.test\nupstream {upstream}\nassertion_ttl 10s\n" +
		"key_reload_interval 1s\nkey_retention 15s\nkey_publish_delay 4s"
	a := startEdge(t, rec, up, storage, cfg)
	b := startEdge(t, rec, up, storage, cfg)
	v, err := mcpiverify.NewVerifier(mcpiverify.WithJWKSURL(a.base+"/.well-known/jwks.json"), mcpiverify.WithAudience(upstreamOrigin),
		mcpiverify.WithIssuer("did:web:edge.test"), mcpiverify.WithRefetchInterval(refetch))
	if err != nil {
		t.Fatal(err)
	}
	verifier.Store(v)

	w := newWorld(t, a.harness)
	tok := w.jwt(t, func(tm *vc.Template) { tm.Audience = []string{a.hostAudience(), b.hostAudience()} })
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": map[string]any{
		"protocolVersion": legacyProtocol, "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "rotation", "version": "0"},
	}})
	oldKid := assertionKid(t, a.send(t, http.Header{"Authorization": {"Bearer " + tok}}).Header.Get("X-Verified-Delegation"))

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var (
		wg       sync.WaitGroup
		sent     atomic.Int64
		failMu   sync.Mutex
		failures []string
	)
	client := &http.Client{Timeout: 10 * time.Second}
	for i, base := range []string{a.base, b.base, a.base, b.base} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/mcp", bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				req.Header.Set("Authorization", "Bearer "+tok)
				resp, err := client.Do(req)
				if ctx.Err() != nil {
					return
				}
				if err != nil {
					failMu.Lock()
					failures = append(failures, fmt.Sprintf("client %d: %v", i, err))
					failMu.Unlock()
					continue
				}
				msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
				resp.Body.Close()
				sent.Add(1)
				if resp.StatusCode != http.StatusOK {
					failMu.Lock()
					failures = append(failures, fmt.Sprintf("%s: HTTP %d %s", time.Now().Format("15:04:05.000"), resp.StatusCode, msg))
					failMu.Unlock()
				}
				time.Sleep(20 * time.Millisecond)
			}
		}()
	}
	// The flood: assertions signed by a key nobody published, straight to
	// the upstream.
	bogus := unknownKidAssertion(t, upstreamOrigin)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, upstreamOrigin+"/mcp", bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("X-Verified-Delegation", bogus)
			if resp, err := client.Do(req); err == nil {
				resp.Body.Close()
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()

	time.Sleep(time.Second)
	t.Logf("rotate-key: %s", a.rotateKey(t))
	// The delay, every replica's reload, and some load on the new key.
	time.Sleep(4*time.Second + 3*time.Second)
	stop()
	wg.Wait()

	var newKid bool
	for _, r := range rec.Requests() {
		if h := r.Header.Get("X-Verified-Delegation"); h != "" && assertionKid(t, h) != oldKid {
			newKid = true
			break
		}
	}
	t.Logf("%d requests through the edges during the rotation", sent.Load())
	if len(failures) > 0 {
		t.Fatalf("%d of %d requests failed during the rotation, first: %s", len(failures), sent.Load(), failures[0])
	}
	if sent.Load() < 50 {
		t.Fatalf("only %d requests made: no load", sent.Load())
	}
	if !newKid {
		t.Fatal("the new key never signed an assertion the upstream accepted")
	}
}

// unknownKidAssertion is an assertion for aud, well formed but signed by a
// key the edge never published.
func unknownKidAssertion(t *testing.T, aud string) string {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	enc := func(v any) string {
		b, _ := json.Marshal(v)
		return base64.RawURLEncoding.EncodeToString(b)
	}
	now := time.Now().Unix()
	input := enc(map[string]string{"alg": "EdDSA", "kid": "did:web:edge.test#" + strings.Repeat("x", 43), "typ": mcpiverify.Type}) + "." +
		enc(map[string]any{"iss": "did:web:edge.test", "aud": aud, "iat": now, "exp": now + 3600, "jti": "x",
			"sub": "did:key:z6Mkuser", "act": map[string]string{"sub": "did:key:z6Mkagent"}, "scope": "", "vc_hash": "sha256:" + strings.Repeat("0", 64)})
	return input + "." + base64.RawURLEncoding.EncodeToString(ed25519.Sign(priv, []byte(input)))
}
