package handshake

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/mcpi-edge/caddy-mcpi/didresolver"
	"github.com/mcpi-edge/caddy-mcpi/internal/jsonscan"
)

// Discovery of the upstream's handshake endpoints (proxy mode).

const (
	// WellKnownPath is where an MCP-I server publishes its discovery
	// document (the upstream's, and the edge's own).
	WellKnownPath = "/.well-known/mcp-i.json"
	// DocumentVersion is the version of the discovery document (the seed's).
	DocumentVersion = "2.0.0"
	// maxDiscoveryDocument bounds a fetched mcp-i.json.
	maxDiscoveryDocument = 64 << 10
	// discoveryRetry caps how long a result is cached when a source could
	// not be reached (as opposed to answering that it has nothing).
	discoveryRetry = 30 * time.Second
	// maxCachedHosts bounds the per-Host discovery cache: the Host is the
	// client's choice.
	maxCachedHosts = 64
)

// Endpoint is one upstream endpoint: a path (with query) on the route's
// upstream, reached through next; or an absolute URL, reached with the
// edge's own client.
type Endpoint struct {
	path, query string
	abs         *url.URL
	// discovered: abs came from a document the operator did not write
	// (upstream_did's services), so it is reached through the SSRF guard.
	discovered bool
}

func (e Endpoint) String() string {
	if e.abs != nil {
		return e.abs.String()
	}
	if e.query != "" {
		return e.path + "?" + e.query
	}
	return e.path
}

// Endpoints are the upstream's handshake and verify endpoints and where
// they were learned (Source: explicit, well-known, did, default).
type Endpoints struct {
	Handshake, Verify Endpoint
	Source            string
}

// ParseEndpoint reads an endpoint setting: an absolute http(s) URL, or a
// path starting with "/".
func ParseEndpoint(s string) (Endpoint, error) { return parseEndpoint(s, nil) }

// parseEndpoint reads an endpoint: an absolute http(s) URL, or a reference
// resolved against base when base is set, else a path starting with "/".
func parseEndpoint(s string, base *url.URL) (Endpoint, error) {
	u, err := url.Parse(s)
	if err != nil {
		return Endpoint{}, errors.New("not a URL")
	}
	if u.IsAbs() || u.Host != "" {
		if base != nil && !u.IsAbs() {
			u = base.ResolveReference(u)
		}
		if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
			return Endpoint{}, errors.New("must be an http(s) URL or a path")
		}
		u.Fragment = ""
		return Endpoint{abs: u}, nil
	}
	if base != nil {
		return Endpoint{abs: base.ResolveReference(u)}, nil
	}
	if !strings.HasPrefix(u.Path, "/") {
		return Endpoint{}, errors.New("must be an http(s) URL or a path starting with /")
	}
	return Endpoint{path: u.Path, query: u.RawQuery}, nil
}

// Localize turns endpoints on the Level 2 upstream origin up into paths,
// so that they are forwarded through the route (reverse_proxy) like any
// request to that upstream, rather than by the edge's own client.
func (eps *Endpoints) Localize(up *url.URL) *Endpoints {
	if up == nil {
		return eps
	}
	for _, e := range []*Endpoint{&eps.Handshake, &eps.Verify} {
		if e.abs != nil && strings.EqualFold(e.abs.Scheme, up.Scheme) && strings.EqualFold(e.abs.Host, up.Host) {
			p := e.abs.Path
			if p == "" {
				p = "/"
			}
			*e = Endpoint{path: p, query: e.abs.RawQuery}
		}
	}
	return eps
}

// discoveryCache holds the discovered endpoints for the discovery TTL, per
// Host when discovery goes through the route (an upstream may answer per
// Host, and one client's Host must not choose every other client's
// endpoints); one discovery runs at a time per Host, the others wait for
// it.
type discoveryCache struct {
	mu      sync.Mutex
	entries map[string]*discoveryEntry // at most maxCachedHosts
}

type discoveryEntry struct {
	cur     *Endpoints
	expires time.Time
	running chan struct{}
}

// entry returns the entry of host, creating it; the caller holds mu.
func (dc *discoveryCache) entry(host string) *discoveryEntry {
	e := dc.entries[host]
	if e == nil {
		if len(dc.entries) >= maxCachedHosts || dc.entries == nil {
			// Many Hosts (or a client making them up): start over rather
			// than grow. Running discoveries finish on their own entries.
			dc.entries = make(map[string]*discoveryEntry, maxCachedHosts)
		}
		e = &discoveryEntry{}
		dc.entries[host] = e
	}
	return e
}

// Discovery finds the upstream's handshake endpoints (proxy mode) and
// caches them.
type Discovery struct {
	// Explicit endpoints (handshake_endpoint) end discovery before it starts.
	Explicit *Endpoints
	// Upstream is the Level 2 upstream origin, or nil: discovery then goes
	// through the route.
	Upstream *url.URL
	// UpstreamDID's services name the endpoints when mcp-i.json does not.
	UpstreamDID string
	Resolver    didresolver.Resolver
	// Client reaches the origins the operator named; Guarded those only a
	// DID document named, through the SSRF guard.
	Client, Guarded *http.Client
	// Default endpoints: the edge's own paths on the route's upstream.
	Default Endpoints
	TTL     time.Duration
	Logger  *zap.Logger

	cache discoveryCache
}

// Endpoints returns the endpoints to forward to: explicit, else cached,
// else discovered now. host keys the cache when discovery goes through
// the route (Upstream nil); it is ignored otherwise.
func (dv *Discovery) Endpoints(r *http.Request, host string, next Next) *Endpoints {
	if dv.Explicit != nil {
		return dv.Explicit
	}
	dc := &dv.cache
	// With the upstream's origin configured, discovery does not depend on
	// the request; through the route, it does on the Host.
	key := ""
	if dv.Upstream == nil {
		key = host
	}
	for {
		dc.mu.Lock()
		de := dc.entry(key)
		if de.cur != nil && time.Now().Before(de.expires) {
			cur := de.cur
			dc.mu.Unlock()
			return cur
		}
		if ch := de.running; ch != nil {
			dc.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-r.Context().Done():
				return dv.defaults()
			}
		}
		ch := make(chan struct{})
		de.running = ch
		dc.mu.Unlock()

		eps, ttl := dv.tracedDiscover(r, next)
		dc.mu.Lock()
		de.cur, de.expires, de.running = eps, time.Now().Add(ttl), nil
		dc.mu.Unlock()
		close(ch)
		if c := dv.Logger.Check(zapcore.DebugLevel, "upstream handshake endpoints discovered"); c != nil {
			c.Write(zap.String("source", eps.Source), zap.Stringer("handshake", eps.Handshake),
				zap.Stringer("verify", eps.Verify), zap.Duration("cached_for", ttl))
		}
		return eps
	}
}

// defaults is a copy of the default endpoints.
func (dv *Discovery) defaults() *Endpoints {
	eps := dv.Default
	eps.Source = "default"
	return &eps
}

// discover finds the upstream's endpoints, in order: its
// /.well-known/mcp-i.json (from the Level 2 upstream origin, else through
// the route), the mcp-i / JSON-RPC services of upstream_did's document, and
// finally the edge's own handshake paths on the route's upstream. It returns how
// long to cache the result: the TTL, or less when a source failed in a way
// that may pass.
func (dv *Discovery) discover(r *http.Request, next Next) (*Endpoints, time.Duration) {
	ttl := dv.TTL
	ctx, cancel := context.WithTimeout(r.Context(), Timeout)
	defer cancel()

	var (
		doc       *Document
		transient bool
	)
	base := dv.Upstream
	if base != nil {
		wk := base.ResolveReference(&url.URL{Path: WellKnownPath})
		doc, transient = dv.fetchDocument(ctx, dv.Client, wk)
		base = wk
	} else {
		doc, transient = dv.fetchDocumentNext(ctx, r, next)
	}
	if doc != nil {
		// Only endpoints on the upstream itself: paths of a document that
		// came through the route, or URLs on the configured upstream
		// origin. A document naming another origin would send agents'
		// credentials and the edge's assertions there.
		if eps := doc.endpoints(base, "well-known"); eps != nil {
			if eps = eps.Localize(dv.Upstream); eps.Handshake.abs == nil && eps.Verify.abs == nil {
				return eps, ttl
			}
			if c := dv.Logger.Check(zapcore.WarnLevel, "upstream mcp-i.json names handshake endpoints on another origin; ignored (set handshake_endpoint to use them)"); c != nil {
				c.Write(zap.Stringer("handshake", eps.Handshake), zap.Stringer("verify", eps.Verify))
			}
		}
	}
	if transient {
		ttl = min(ttl, discoveryRetry)
	}
	if dv.UpstreamDID != "" {
		eps, transient := dv.didEndpoints(ctx)
		if eps != nil {
			return eps.Localize(dv.Upstream), ttl
		}
		if transient {
			ttl = min(ttl, discoveryRetry)
		}
	}
	return dv.defaults(), ttl
}

// Document is an mcp-i.json discovery document.
type Document struct {
	MCPI struct {
		Version          string            `json:"version"`
		Endpoints        map[string]string `json:"endpoints"`
		SupportedMethods []string          `json:"supportedMethods"`
	} `json:"mcp_i"`
}

// ParseDocument reads an mcp-i.json, or returns nil: also for a document
// whose member names are repeated or case variants of the ones read
// (strict.go), or that holds anything after its object.
func ParseDocument(data []byte) *Document {
	top, err := jsonscan.Object(data, "mcp_i")
	if err != nil {
		return nil
	}
	var d Document
	if !present(top["mcp_i"]) {
		return &d
	}
	m, err := jsonscan.Object(top["mcp_i"], "version", "endpoints", "supportedMethods")
	if err != nil {
		return nil
	}
	if eps := m["endpoints"]; present(eps) {
		if _, err := jsonscan.Object(eps, "handshake", "verify"); err != nil {
			return nil
		}
	}
	if !decodeMember(m, "version", &d.MCPI.Version) || !decodeMember(m, "endpoints", &d.MCPI.Endpoints) ||
		!decodeMember(m, "supportedMethods", &d.MCPI.SupportedMethods) {
		return nil
	}
	return &d
}

// endpoints returns the document's handshake and verify endpoints, resolved
// against base (nil: paths on the route's upstream), or nil if it names no
// usable handshake endpoint. A missing verify endpoint is the handshake one.
func (d *Document) endpoints(base *url.URL, source string) *Endpoints {
	hsRaw := d.MCPI.Endpoints["handshake"]
	if hsRaw == "" {
		return nil
	}
	vfRaw := d.MCPI.Endpoints["verify"]
	if vfRaw == "" {
		vfRaw = hsRaw
	}
	if base == nil {
		// Relative references of a document fetched through the route are
		// relative to the document.
		base = &url.URL{Path: WellKnownPath}
	}
	hs, err1 := resolveDiscovered(hsRaw, base)
	vf, err2 := resolveDiscovered(vfRaw, base)
	if err1 != nil || err2 != nil {
		return nil
	}
	return &Endpoints{Handshake: hs, Verify: vf, Source: source}
}

// resolveDiscovered resolves a discovered reference against base; when base
// is only a path (the document came through the route), the result stays a
// path on the route's upstream unless the reference was absolute.
func resolveDiscovered(ref string, base *url.URL) (Endpoint, error) {
	if base.IsAbs() {
		return parseEndpoint(ref, base)
	}
	u, err := url.Parse(ref)
	if err != nil {
		return Endpoint{}, err
	}
	if u.IsAbs() || u.Host != "" {
		return parseEndpoint(ref, nil)
	}
	return parseEndpoint(base.ResolveReference(u).String(), nil)
}

// fetchDocument GETs an mcp-i.json with the edge's client. transient is
// true when the failure may pass (network error, 5xx), false when the
// upstream answered that there is none.
func (dv *Discovery) fetchDocument(ctx context.Context, client *http.Client, u *url.URL) (doc *Document, transient bool) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, false
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		if c := dv.Logger.Check(zapcore.DebugLevel, "fetching upstream mcp-i.json"); c != nil {
			c.Write(zap.Stringer("url", u), zap.Error(err))
		}
		return nil, true
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, resp.StatusCode >= 500
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxDiscoveryDocument+1))
	if err != nil {
		return nil, true
	}
	if len(data) > maxDiscoveryDocument {
		return nil, false
	}
	return ParseDocument(data), false
}

// fetchDocumentNext GETs /.well-known/mcp-i.json through the rest of the
// route (the same upstream the handshake calls go to), with none of the
// client's headers but Host.
func (dv *Discovery) fetchDocumentNext(ctx context.Context, r *http.Request, next Next) (doc *Document, transient bool) {
	req := r.Clone(ctx)
	req.Method = http.MethodGet
	req.URL.Path, req.URL.RawPath, req.URL.RawQuery = WellKnownPath, "", ""
	req.RequestURI = req.URL.RequestURI()
	req.Header = http.Header{"Accept": {"application/json"}}
	req.Body, req.GetBody, req.ContentLength, req.TransferEncoding = http.NoBody, nil, 0, nil
	cw := newCaptureWriter()
	if err := next(cw, req); err != nil {
		if c := dv.Logger.Check(zapcore.DebugLevel, "fetching upstream mcp-i.json through the route"); c != nil {
			c.Write(zap.Error(err))
		}
		return nil, true
	}
	switch status := cw.resp.Status; {
	case cw.resp.Overflow:
		return nil, false
	case status == http.StatusOK || status == 0:
		return ParseDocument(cw.resp.Body), false
	default:
		return nil, status >= 500
	}
}

// didEndpoints reads the upstream DID document's services of type mcp-i or
// JSON-RPC. A service's endpoint may be a map with handshake and verify
// members, URLs (one whose service id or path says "verify" is the verify
// endpoint, any other the handshake endpoint, and a lone one both), or the
// URL of an mcp-i.json, which is then fetched.
func (dv *Discovery) didEndpoints(ctx context.Context) (eps *Endpoints, transient bool) {
	doc, err := dv.Resolver.Resolve(ctx, dv.UpstreamDID)
	if err != nil || doc == nil {
		if c := dv.Logger.Check(zapcore.DebugLevel, "resolving upstream_did"); c != nil {
			c.Write(zap.String("did", dv.UpstreamDID), zap.Error(err))
		}
		return nil, true
	}
	var hs, vf, wk string
	for _, s := range doc.Service {
		if !isHandshakeServiceType(s.Types()) {
			continue
		}
		if m, ok := s.ServiceEndpoint.(map[string]any); ok {
			if v, ok := m["handshake"].(string); ok && hs == "" {
				hs = v
			}
			if v, ok := m["verify"].(string); ok && vf == "" {
				vf = v
			}
			continue
		}
		for _, e := range s.Endpoints() {
			u, err := url.Parse(e)
			if err != nil || !u.IsAbs() {
				continue
			}
			switch {
			case strings.HasSuffix(u.Path, WellKnownPath):
				if wk == "" {
					wk = e
				}
			case strings.Contains(strings.ToLower(s.ID+" "+u.Path), "verify"):
				if vf == "" {
					vf = e
				}
			default:
				if hs == "" {
					hs = e
				}
			}
		}
	}
	if hs == "" && wk != "" {
		u, _ := url.Parse(wk)
		d, tr := dv.fetchDocument(ctx, dv.Guarded, u)
		if d != nil {
			if eps := d.endpoints(u, "did"); eps != nil {
				eps.Handshake.discovered, eps.Verify.discovered = true, true
				return eps, false
			}
		}
		return nil, tr
	}
	if hs == "" {
		return nil, false
	}
	if vf == "" {
		vf = hs
	}
	hsRef, err1 := parseEndpoint(hs, nil)
	vfRef, err2 := parseEndpoint(vf, nil)
	if err1 != nil || err2 != nil || hsRef.abs == nil || vfRef.abs == nil {
		return nil, false
	}
	hsRef.discovered, vfRef.discovered = true, true
	return &Endpoints{Handshake: hsRef, Verify: vfRef, Source: "did"}, false
}

func isHandshakeServiceType(types []string) bool {
	for _, t := range types {
		if strings.EqualFold(t, "mcp-i") || strings.EqualFold(t, "JSON-RPC") {
			return true
		}
	}
	return false
}

// PathEndpoint is the path p on the route's upstream, taken as it is.
func PathEndpoint(p string) Endpoint { return Endpoint{path: p} }
