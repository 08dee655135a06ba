// Command peer is the bench harness's other side of Caddy, run as its own
// process so that it can be pinned to the load generator's core:
//
//	peer upstream -addr 127.0.0.1:0
//		a fast MCP upstream: every POST gets one fixed JSON-RPC result.
//		It prints "listening <addr>" once bound. GET /__stats returns,
//		per first path segment, how many requests arrived, how many
//		still carried a credential (Authorization header, or
//		delegationToken in the body) and how many carried
//		X-Verified-Delegation, how many 2026-era requests arrived with
//		their framing headers (Mcp-Method) and how many of those still
//		held a KYA-OS request proof in the body, so the harness can check
//		that every configuration did what it claims.
//
//	peer handshakes -url http://127.0.0.1:8080 -hs /f/handshake -vf /f/verify \
//		-agent-did did:key:… -agent-seed <file> -cred <file> -c 32 -d 5s
//		drives Level 3 handshakes (handshake, sign the challenge, verify)
//		from -c keep-alive connections for -d, and prints one JSON line of
//		results.
//
//	peer openloop -url http://127.0.0.1:8080/a/mcp -cred <file> -rate 5000 -d 5s
//		sends the bench's tools/call POST at a constant rate for -d with
//		vegeta's open-loop attacker over keep-alive connections, and
//		prints one JSON line: latency percentiles, errors, how late the
//		sends were against the schedule, connections opened.
package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/challenge"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: peer upstream|handshakes|openloop [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "upstream":
		err = upstream(os.Args[2:])
	case "handshakes":
		err = handshakes(os.Args[2:])
	case "openloop":
		err = openLoop(os.Args[2:], os.Stdout)
	default:
		err = fmt.Errorf("unknown mode %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "peer:", err)
		os.Exit(1)
	}
}

// Result is the upstream's one answer: what an MCP server returns for a
// tools/call of greet.
const Result = `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"Hello, Ada"}],"isError":false}}`

// RouteStats is what the upstream saw on one route (first path segment).
type RouteStats struct {
	Requests int64 `json:"requests"`
	// Leaked counts requests that still carried a credential.
	Leaked int64 `json:"leaked"`
	// Asserted counts requests with an X-Verified-Delegation header.
	Asserted int64 `json:"asserted"`
	// Framed counts 2026-era requests (MCP-Protocol-Version 2026-07-28)
	// that arrived with their Mcp-Method header.
	Framed int64 `json:"framed"`
	// Proved counts framed requests whose body still held a KYA-OS request
	// proof (the edge leaves it in place for an upstream that checks it).
	Proved int64 `json:"proved"`
}

type routeCounters struct{ requests, leaked, asserted, framed, proved atomic.Int64 }

type upstreamServer struct {
	mu     sync.RWMutex
	routes map[string]*routeCounters
}

func (u *upstreamServer) counters(route string) *routeCounters {
	u.mu.RLock()
	c := u.routes[route]
	u.mu.RUnlock()
	if c != nil {
		return c
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if c = u.routes[route]; c == nil {
		c = new(routeCounters)
		u.routes[route] = c
	}
	return c
}

var (
	resultBody = []byte(Result)
	tokenKey   = []byte(`"delegationToken"`)
	proofKey   = []byte(`"org.kya-os/request-proof"`)
	jsonType   = []string{"application/json"}
	resultLen  = []string{fmt.Sprint(len(Result))}
	bufPool    = sync.Pool{New: func() any { return new(bytes.Buffer) }}
)

func (u *upstreamServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && r.URL.Path == "/__stats" {
		u.serveStats(w)
		return
	}
	buf := bufPool.Get().(*bytes.Buffer)
	buf.Reset()
	_, err := buf.ReadFrom(r.Body)
	leaked := bytes.Contains(buf.Bytes(), tokenKey)
	framed := r.Header.Get("Mcp-Method") != "" && r.Header.Get("Mcp-Protocol-Version") == "2026-07-28"
	proved := framed && bytes.Contains(buf.Bytes(), proofKey)
	bufPool.Put(buf)
	if err != nil {
		http.Error(w, "reading the body: "+err.Error(), http.StatusBadRequest)
		return
	}
	route, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	c := u.counters(route)
	c.requests.Add(1)
	if leaked || r.Header.Get("Authorization") != "" {
		c.leaked.Add(1)
	}
	if r.Header.Get("X-Verified-Delegation") != "" {
		c.asserted.Add(1)
	}
	if framed {
		c.framed.Add(1)
	}
	if proved {
		c.proved.Add(1)
	}
	h := w.Header()
	h["Content-Type"] = jsonType
	h["Content-Length"] = resultLen
	_, _ = w.Write(resultBody)
}

func (u *upstreamServer) serveStats(w http.ResponseWriter) {
	out := make(map[string]RouteStats)
	u.mu.RLock()
	for k, c := range u.routes {
		out[k] = RouteStats{Requests: c.requests.Load(), Leaked: c.leaked.Load(), Asserted: c.asserted.Load(),
			Framed: c.framed.Load(), Proved: c.proved.Load()}
	}
	u.mu.RUnlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

func upstream(args []string) error {
	fs := flag.NewFlagSet("upstream", flag.ExitOnError)
	addr := fs.String("addr", "127.0.0.1:0", "listen address")
	_ = fs.Parse(args)
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	fmt.Printf("listening %s\n", ln.Addr())
	srv := &http.Server{Handler: &upstreamServer{routes: make(map[string]*routeCounters)}, ReadHeaderTimeout: 10 * time.Second}
	return srv.Serve(ln)
}

// HandshakeResult is the JSON line printed by the handshakes mode.
type HandshakeResult struct {
	Handshakes int64   `json:"handshakes"`
	Errors     int64   `json:"errors"`
	FirstError string  `json:"first_error,omitempty"`
	Seconds    float64 `json:"seconds"`
	P50us      float64 `json:"p50_us"`
	P99us      float64 `json:"p99_us"`
}

func handshakes(args []string) error {
	fs := flag.NewFlagSet("handshakes", flag.ExitOnError)
	base := fs.String("url", "", "edge origin, http://127.0.0.1:<port>")
	hsPath := fs.String("hs", "", "handshake path")
	vfPath := fs.String("vf", "", "verify path")
	agentDID := fs.String("agent-did", "", "agent DID (did:key of the seed's key)")
	seedFile := fs.String("agent-seed", "", "file holding the agent's Ed25519 seed, hex")
	credFile := fs.String("cred", "", "file holding the agent's delegation VC-JWT")
	conns := fs.Int("c", 32, "concurrent connections")
	dur := fs.Duration("d", 5*time.Second, "duration")
	_ = fs.Parse(args)

	seedHex, err := os.ReadFile(*seedFile)
	if err != nil {
		return err
	}
	seed, err := hex.DecodeString(strings.TrimSpace(string(seedHex)))
	if err != nil || len(seed) != ed25519.SeedSize {
		return fmt.Errorf("agent seed: want %d hex bytes", ed25519.SeedSize)
	}
	priv := ed25519.NewKeyFromSeed(seed)
	cred, err := os.ReadFile(*credFile)
	if err != nil {
		return err
	}
	credJSON, _ := json.Marshal(strings.TrimSpace(string(cred)))

	tr := &http.Transport{MaxIdleConnsPerHost: *conns, MaxConnsPerHost: *conns, DisableCompression: true}
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	a := agent{client: client, hsURL: *base + *hsPath, vfURL: *base + *vfPath, did: *agentDID, priv: priv, cred: credJSON}

	ctx, cancel := context.WithTimeout(context.Background(), *dur)
	defer cancel()
	var (
		mu         sync.Mutex
		lat        []time.Duration
		errs       int64
		firstError string
		wg         sync.WaitGroup
	)
	start := time.Now()
	for range *conns {
		wg.Go(func() {
			var mine []time.Duration
			var myErrs int64
			var myFirst string
			for ctx.Err() == nil {
				t0 := time.Now()
				if err := a.handshake(ctx); err != nil {
					if ctx.Err() != nil {
						break // cut off by the end of the run, not a failure
					}
					myErrs++
					if myFirst == "" {
						myFirst = err.Error()
					}
					continue
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			lat = append(lat, mine...)
			errs += myErrs
			if firstError == "" {
				firstError = myFirst
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	slices.Sort(lat)
	res := HandshakeResult{Handshakes: int64(len(lat)), Errors: errs, FirstError: firstError, Seconds: elapsed.Seconds()}
	if len(lat) > 0 {
		res.P50us = float64(lat[len(lat)*50/100].Microseconds())
		res.P99us = float64(lat[min(len(lat)-1, len(lat)*99/100)].Microseconds())
	}
	return json.NewEncoder(os.Stdout).Encode(res)
}

type agent struct {
	client       *http.Client
	hsURL, vfURL string
	did          string
	priv         ed25519.PrivateKey
	cred         json.RawMessage
}

type rpcReply struct {
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// handshake runs one handshake: ask for a challenge, sign it, answer it,
// and check that the edge verified it and issued a session.
func (a *agent) handshake(ctx context.Context) error {
	var hr challenge.HandshakeResult
	if err := a.call(ctx, a.hsURL, map[string]any{"jsonrpc": "2.0", "id": 1, "method": "handshake",
		"params": map[string]any{"agentDid": a.did, "supportedMethods": []string{challenge.MethodEd25519}, "version": "1.0"}}, &hr); err != nil {
		return fmt.Errorf("handshake: %w", err)
	}
	sc, err := challenge.SignChallenge(a.priv, challenge.SignedChallenge{
		Challenge: hr.Challenge, Nonce: hr.Nonce, AgentDID: a.did,
		Timestamp: challenge.TimestampRFC3339(time.Now()),
	})
	if err != nil {
		return err
	}
	var vr challenge.VerifyResult
	if err := a.call(ctx, a.vfURL, map[string]any{"jsonrpc": "2.0", "id": 2, "method": "verify",
		"params": map[string]any{"signedChallenge": sc, "credential": a.cred}}, &vr); err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	if !vr.Verified || vr.SessionID == "" {
		return errors.New("verify: not verified, or no session")
	}
	return nil
}

func (a *agent) call(ctx context.Context, url string, msg any, out any) error {
	body, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := a.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP %d: %.200s", resp.StatusCode, data)
	}
	var rep rpcReply
	if err := json.Unmarshal(data, &rep); err != nil {
		return fmt.Errorf("not JSON-RPC: %.200s", data)
	}
	if rep.Error != nil {
		return fmt.Errorf("JSON-RPC error %d: %s", rep.Error.Code, rep.Error.Message)
	}
	return json.Unmarshal(rep.Result, out)
}
