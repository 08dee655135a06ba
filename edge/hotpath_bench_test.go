package edge

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/mcpi-edge/caddy-mcpi/edge/observe/observetest"
	"github.com/mcpi-edge/caddy-mcpi/vc"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// hotPathReply is the upstream's answer in BenchmarkHotPath: a small tool
// result, as the whole-proxy benchmark's upstream sends.
const hotPathReply = `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"hi"}]}}`

// BenchmarkHotPath is what ServeHTTP costs a request whose credential was
// verified before (the verified-delegation cache hit path), in the
// configurations of BENCHMARKS.md: b (level 1, bearer credential reused),
// b-hdr (b reading only the Authorization carrier), d (level 2, assertion
// reused), e-tool (b plus a per-tool rule for the called tool) and e-cel
// (e-tool with a CEL rule over the arguments and the delegation). "a" is
// b-2026 is b as a 2026-era stateless request (MCP-Protocol-Version,
// Mcp-Method and Mcp-Name checked against the body, which is parsed once).
// c is b with a fresh credential on every request, all from one issuer as
// in the whole-proxy bench: the miss path (the bearer recognized, the
// VC-JWT parsed, its signature checked). Its tokens come from a ring of
// freshCredentials minted before the timer. The whole-proxy bench never
// sends a token twice; the ring does, so c's handler has a cache of
// freshCache entries, filled with other tokens first, as under sustained
// load: a full cache stores a token only the second time it is verified
// and its doorkeeper remembers about 4×freshCache tokens, far fewer than
// the ring, so no token of the ring is ever stored or served from the
// cache (vc/cache/admission.go).
// "a" is the same request handed straight to next: what every other line spends
// outside the handler (building the request, the recorder, the upstream's
// answer), so a line minus "a" is the handler's own cost.
//
// The handler logs as Caddy does by default, JSON at INFO (to io.Discard),
// so the audit entry of every admission is built and encoded, and counts
// into a real metrics registry. On a shared machine compare cpu-ns/op (the
// process's CPU time, GC included) and allocs/op rather than ns/op.
func BenchmarkHotPath(b *testing.B) {
	f := newFixture(b)
	tok := f.jwt(b, nil)
	auth := "Bearer " + tok
	body := []byte(toolsCallBody)
	next := Next(func(w http.ResponseWriter, r *http.Request) error {
		// The upstream reads the body, as reverse_proxy would.
		if r.Body != nil {
			_, _ = io.Copy(io.Discard, r.Body)
		}
		w.Header().Set("Content-Type", "application/json")
		_, err := io.WriteString(w, hotPathReply)
		return err
	})
	logger := zap.New(zapcore.NewCore(
		zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(io.Discard), zapcore.InfoLevel))
	// observed gives a handler the logger and a registry before it is
	// built: its Recorder takes both then (set later, they would be unused).
	observed := func(c *setup) {
		c.use(WithLogger(logger))
		c.use(WithMetrics(prometheus.NewRegistry()))
	}

	// freshRegistry is c's, to count its cache hits.
	freshRegistry := prometheus.NewRegistry()

	for _, tc := range []struct {
		name  string
		h     func(b *testing.B) *Handler // nil: no mcpi handler
		era   bool                        // a 2026-era request
		fresh bool                        // a fresh credential on every request
	}{
		{"a", nil, false, false},
		{"b", func(b *testing.B) *Handler { return f.handler(b, observed) }, false, false},
		{"b-2026", func(b *testing.B) *Handler { return f.handler(b, observed) }, true, false},
		{"c", func(b *testing.B) *Handler {
			return f.handler(b, func(c *setup) {
				observed(c)
				c.use(WithMetrics(freshRegistry))
				c.VerificationCacheSize = freshCache
			})
		}, false, true},
		{"b-hdr", func(b *testing.B) *Handler {
			return f.handler(b, func(c *setup) { observed(c); c.Carriers = []string{"authorization"} })
		}, false, false},
		{"d", func(b *testing.B) *Handler { return f.l2Handler(b, nil, observed) }, false, false},
		{"e-tool", func(b *testing.B) *Handler {
			return f.handler(b, func(c *setup) {
				observed(c)
				c.Tools = []ToolPolicy{{Name: "echo", Scopes: []string{"echo:execute"}}}
			})
		}, false, false},
		{"e-cel", func(b *testing.B) *Handler {
			return f.handler(b, func(c *setup) {
				observed(c)
				c.Tools = []ToolPolicy{{Name: "echo", Scopes: []string{"echo:execute"}, Rules: []RuleConfig{
					{Name: "short_text", Expression: "arguments.text.size() <= 100 && 'echo:execute' in delegation.scopes"}}}}
			})
		}, false, false},
	} {
		b.Run(tc.name, func(b *testing.B) {
			serve := func(w http.ResponseWriter, r *http.Request) error { return next(w, r) }
			if tc.h != nil {
				h := tc.h(b)
				serve = func(w http.ResponseWriter, r *http.Request) error { return h.ServeNext(w, r, next) }
			}
			req, reqBody := hotPathRequest, body
			if tc.era {
				req, reqBody = hotPathRequest2026, []byte(toolsCallBody2026)
			}
			nextAuth := func() string { return auth }
			one := func(auth string) {
				r, w := req(reqBody, auth), httptest.NewRecorder()
				if err := serve(w, r); err != nil || w.Code != http.StatusOK || w.Body.String() != hotPathReply {
					b.Fatalf("HTTP %d %q: %v", w.Code, w.Body, err)
				}
			}
			if tc.fresh {
				ring, i := freshBearers(b, f), 0
				for _, a := range ring[:freshFill] {
					one(a)
				}
				ring = ring[freshFill:]
				nextAuth = func() string {
					a := ring[i]
					if i++; i == len(ring) {
						i = 0
					}
					return a
				}
			}
			one(nextAuth()) // the first request fills the caches
			b.ReportAllocs()
			cpu0, cpuOK := processCPU()
			for b.Loop() {
				one(nextAuth())
			}
			if cpu1, ok := processCPU(); ok && cpuOK {
				b.ReportMetric(float64(cpu1-cpu0)/float64(b.N), "cpu-ns/op")
			}
			if tc.fresh {
				all := observetest.Gather(b, freshRegistry)
				const lookups = "caddy_mcpi_cache_requests_total"
				if hits, misses := observetest.Value(all, lookups, "cache", "delegation", "result", "hit"),
					observetest.Value(all, lookups, "cache", "delegation", "result", "miss"); hits != 0 || misses == 0 {
					b.Fatalf("fresh credentials: %v cache hits, %v misses", hits, misses)
				}
			}
		})
	}
}

// BenchmarkHotPath's c: its handler's verified-delegation cache, the
// tokens that fill it (four times as many, so that each of its shards,
// chosen by key, is full), and how many distinct credentials it mints (the
// filling, then the ring it cycles through).
const (
	freshCache       = 256
	freshFill        = 4 * freshCache
	freshCredentials = freshFill + 2*DefaultVerificationCache
)

// freshBearers mints freshCredentials VC-JWTs of f (each its own jti), on
// every core, as Authorization values.
func freshBearers(b *testing.B, f fixture) []string {
	out := make([]string, freshCredentials)
	var wg sync.WaitGroup
	workers := runtime.GOMAXPROCS(0)
	errs := make([]error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := w; i < len(out); i += workers {
				tok, err := vc.IssueJWT(f.user.priv, f.user.kid, f.template(func(t *vc.Template) { t.ID = "" }))
				if err != nil {
					errs[w] = err
					return
				}
				out[i] = "Bearer " + tok
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		b.Fatal(err)
	}
	return out
}

// hotPathRequest is the POST of BenchmarkHotPath: body with the credential
// in Authorization, as Caddy hands it to the handler.
func hotPathRequest(body []byte, auth string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "http://"+testHost+"/mcp", bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Accept", "application/json, text/event-stream")
	r.Header.Set("Authorization", auth)
	return prepareRequest(r, newTestReplacer())
}

// toolsCallBody2026 is toolsCallBody as a 2026-era client sends it (the
// whole-proxy bench's b-2026).
const toolsCallBody2026 = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`

// hotPathRequest2026 is hotPathRequest as a 2026-era stateless request:
// the framing headers that mirror the body.
func hotPathRequest2026(body []byte, auth string) *http.Request {
	r := hotPathRequest(body, auth)
	r.Header.Set("MCP-Protocol-Version", "2026-07-28")
	r.Header.Set("Mcp-Method", "tools/call")
	r.Header.Set("Mcp-Name", "echo")
	return r
}

// BenchmarkBodies is BenchmarkHotPath's b for bodies the carriers must
// read: the credential in Authorization or in params.delegationToken (the
// whole-proxy bench's e: found, verified, cut out of the body), with the
// arguments of the tools/call small or about 8 KiB of nested JSON, and with
// a per-tool rule (the tool policy reads the body again).
func BenchmarkBodies(b *testing.B) {
	f := newFixture(b)
	tok := f.jwt(b, nil)
	small := `{"text":"hi"}`
	var big strings.Builder
	big.WriteString(`{"items":[`)
	for i := range 64 {
		if i > 0 {
			big.WriteByte(',')
		}
		fmt.Fprintf(&big, `{"id":%d,"name":"item %d","tags":["a","b","c"],"text":"%s","n":{"x":1.5e3,"y":null,"z":true}}`, i, i, strings.Repeat("lorem ipsum ", 6))
	}
	big.WriteString(`]}`)
	next := Next(func(w http.ResponseWriter, r *http.Request) error {
		body, _ := io.ReadAll(r.Body)
		if bytes.Contains(body, []byte("delegationToken")) {
			return errors.New("credential forwarded")
		}
		w.Header().Set("Content-Type", "application/json")
		_, err := io.WriteString(w, hotPathReply)
		return err
	})
	for _, tc := range []struct {
		name, args string
		inBody     bool
		policy     bool
	}{
		{"bearer/small", small, false, false},
		{"bearer/8KiB", big.String(), false, false},
		{"body/small", small, true, false},
		{"body/8KiB", big.String(), true, false},
		{"bearer/8KiB/tool-policy", big.String(), false, true},
	} {
		b.Run(tc.name, func(b *testing.B) {
			h := f.handler(b, func(c *setup) {
				if tc.policy {
					c.Tools = []ToolPolicy{{Name: "echo", Scopes: []string{"echo:execute"}}}
				}
			})
			params := `"name":"echo",`
			if tc.inBody {
				params += `"delegationToken":"` + tok + `",`
			}
			body := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{` + params + `"arguments":` + tc.args + `}}`)
			one := func() {
				r := httptest.NewRequest(http.MethodPost, "http://"+testHost+"/mcp", bytes.NewReader(body))
				r.Header.Set("Content-Type", "application/json")
				if !tc.inBody {
					r.Header.Set("Authorization", "Bearer "+tok)
				}
				w := httptest.NewRecorder()
				r = prepareRequest(r, newTestReplacer())
				if err := h.ServeNext(w, r, next); err != nil || w.Code != http.StatusOK {
					b.Fatalf("HTTP %d %q: %v", w.Code, w.Body, err)
				}
			}
			one()
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				one()
			}
		})
	}
}
