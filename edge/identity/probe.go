package identity

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"sync"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/mcpi-edge/caddy-mcpi/internal/jsonscan"
)

// How upstream_mcpi auto learns whether the upstream is MCP-I-aware
// (docs/protocol/mcpi.md#level-2-what-the-upstream-is-told: by serving /.well-known/mcp-i.json, or by an MCP-I-Version
// response header), without ever holding a request for long.
const (
	probeDocPath = "/.well-known/mcp-i.json"
	// hdrUpstreamMCPIVersion is the response header by which an upstream declares
	// MCP-I support.
	hdrUpstreamMCPIVersion = "Mcp-I-Version"

	// probeWait is the longest a request waits for the first probe; after
	// it the upstream counts as not declared for that request.
	probeWait = 200 * time.Millisecond
	// probeTimeout bounds one probe.
	probeTimeout = 5 * time.Second
	// probeErrorTTL caps how long a failed probe (network error, 5xx) is
	// trusted, so a restarting upstream is seen again soon.
	probeErrorTTL = 30 * time.Second
	// maxProbeDocument caps the probed document.
	maxProbeDocument = 64 << 10
)

// upstreamProbe is the state machine of upstream_mcpi auto for one upstream:
//
//	unknown ──probe──► declared | not declared   (each valid for ttl)
//	stale   ──request──► answer with the stale value, re-probe in background
//	any     ──MCP-I-Version seen in a response──► declared for ttl
//
// Probes run in the background: the first request waits for the first probe
// at most probeWait (it was started at provisioning, so it is usually done).
type upstreamProbe struct {
	ctx    context.Context // cancelled at cleanup
	wg     *sync.WaitGroup
	url    string // <upstream>/.well-known/mcp-i.json
	ttl    time.Duration
	client *http.Client
	logger *zap.Logger
	now    func() time.Time

	mu          sync.Mutex
	known       bool      // a probe has completed
	declaredDoc bool      // what the last probe found
	expires     time.Time // when the last probe's answer goes stale
	headerUntil time.Time // MCP-I-Version seen: declared until then
	inflight    chan struct{}
	stopped     bool
}

func newUpstreamProbe(ctx context.Context, wg *sync.WaitGroup, origin *url.URL, ttl time.Duration, logger *zap.Logger) *upstreamProbe {
	return &upstreamProbe{
		ctx: ctx,
		wg:  wg,
		url: origin.String() + probeDocPath,
		ttl: ttl,
		client: &http.Client{
			Timeout:   probeTimeout,
			Transport: &http.Transport{Proxy: nil, MaxIdleConns: 2, IdleConnTimeout: time.Minute},
			// A redirect is not a declaration: the document must be served
			// by the upstream itself.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		logger: logger,
		now:    time.Now,
	}
}

// declared reports whether the upstream gets the identity headers now.
func (p *upstreamProbe) declared(ctx context.Context) bool {
	now := p.now()
	p.mu.Lock()
	if now.Before(p.headerUntil) {
		p.mu.Unlock()
		return true
	}
	if p.known && now.Before(p.expires) {
		d := p.declaredDoc
		p.mu.Unlock()
		return d
	}
	ch := p.startLocked()
	known, d := p.known, p.declaredDoc
	p.mu.Unlock()
	if known || ch == nil {
		return d // stale: keep the last answer while the re-probe runs
	}
	t := time.NewTimer(probeWait)
	defer t.Stop()
	select {
	case <-ch:
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.declaredDoc || p.now().Before(p.headerUntil)
	case <-t.C:
	case <-ctx.Done():
	}
	return false
}

// start begins a probe unless one is running.
func (p *upstreamProbe) start() {
	p.mu.Lock()
	p.startLocked()
	p.mu.Unlock()
}

// startLocked starts a probe unless one is running (or the probe is
// stopped) and returns the channel closed when it ends; nil once stopped.
func (p *upstreamProbe) startLocked() chan struct{} {
	if p.inflight != nil || p.stopped {
		return p.inflight
	}
	ch := make(chan struct{})
	p.inflight = ch
	p.wg.Add(1) // under mu, and never after stop: see stop
	go func() {
		defer p.wg.Done()
		declared, err := p.fetch()
		now := p.now()
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.ctx.Err() == nil {
			ttl := p.ttl
			if err != nil && ttl > probeErrorTTL {
				ttl = probeErrorTTL
			}
			if c := p.logger.Check(zapcore.DebugLevel, "upstream MCP-I probe"); c != nil {
				c.Write(zap.String("url", p.url), zap.Bool("declared", declared), zap.Error(err))
			}
			if err != nil && p.known {
				// A failed re-probe proves nothing: keep the last verdict
				// for a while rather than flip on a network blip.
				declared = p.declaredDoc
			}
			p.known, p.declaredDoc, p.expires = true, declared, now.Add(ttl)
		}
		p.inflight = nil
		close(ch)
	}()
	return ch
}

// stop refuses new probes; the caller then cancels the context and waits
// for the running one.
func (p *upstreamProbe) stop() {
	p.mu.Lock()
	p.stopped = true
	p.mu.Unlock()
}

// errProbe is a probe that could not reach a verdict (network, 5xx).
var errProbe = errors.New("upstream MCP-I probe failed")

// fetch GETs the upstream's /.well-known/mcp-i.json. The upstream declares
// MCP-I support when it answers 200 with a JSON object holding an "mcp_i"
// object (the seed's discovery document), or when the answer, whatever its
// status, carries MCP-I-Version.
func (p *upstreamProbe) fetch() (bool, error) {
	ctx, cancel := context.WithTimeout(p.ctx, probeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.url, nil)
	if err != nil {
		return false, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := p.client.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	if resp.Header.Get(hdrUpstreamMCPIVersion) != "" {
		return true, nil
	}
	switch {
	case resp.StatusCode >= 500:
		return false, errProbe
	case resp.StatusCode != http.StatusOK:
		return false, nil // 404 and friends: a clear "no"
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxProbeDocument+1))
	if err != nil {
		return false, err
	}
	if len(body) > maxProbeDocument {
		return false, nil
	}
	return declaresMCPI(body), nil
}

// declaresMCPI reports whether body, the upstream's mcp-i.json, is one JSON
// object holding an "mcp_i" object. It is read strictly (jsonscan.Object):
// a document whose member names repeat in some letter case, or spell
// "mcp_i" in another case, or that has anything after its object, is no
// declaration, so the edge never tells an upstream it is MCP-I-aware on a
// document an MCP-I client would read otherwise.
func declaresMCPI(body []byte) bool {
	doc, err := jsonscan.Object(body, "mcp_i")
	return err == nil && len(doc["mcp_i"]) > 0 && doc["mcp_i"][0] == '{'
}

// learnHeader records that a response of the upstream carried
// MCP-I-Version.
func (p *upstreamProbe) learnHeader() {
	now := p.now()
	p.mu.Lock()
	p.headerUntil = now.Add(p.ttl)
	p.mu.Unlock()
}

// observe arranges for the upstream's response to r to be checked for
// MCP-I-Version once the request is done. The handler never sees the
// response (it calls next with the ResponseWriter it was given and never
// wraps it, so SSE streams stay unbuffered); the host keeps the upstream's
// response headers (Hooks.UpstreamHeader; Caddy: reverse_proxy's
// {http.reverse_proxy.header.*}), and the request's context ends when the
// handler chain has returned. This learns for the requests that follow,
// never for r itself. Without the hook only the document probe learns.
func (p *upstreamProbe) observe(r *http.Request, header func(*http.Request, string) (string, bool)) {
	if header == nil {
		return
	}
	context.AfterFunc(r.Context(), func() {
		if v, ok := header(r, hdrUpstreamMCPIVersion); ok && v != "" {
			p.learnHeader()
		}
	})
}
