package edge

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/mcpi-edge/caddy-mcpi/assertion"
)

// Discovery of the upstream's handshake endpoints (proxy mode), the edge's
// own /.well-known/mcp-i.json, and its did:web service entries.

const (
	wellKnownMCPI = "/.well-known/mcp-i.json"
	// mcpiDocVersion is the version of the discovery document (the seed's).
	mcpiDocVersion = "2.0.0"
	// maxDiscoveryDocument bounds a fetched mcp-i.json.
	maxDiscoveryDocument = 64 << 10
	// discoveryRetry caps how long a result is cached when a source could
	// not be reached (as opposed to answering that it has nothing).
	discoveryRetry = 30 * time.Second
)

// endpointRef is one upstream endpoint: a path (with query) on the route's
// upstream, reached through next; or an absolute URL, reached with the
// edge's own client.
type endpointRef struct {
	path, query string
	abs         *url.URL
	// discovered: abs came from a document the operator did not write
	// (upstream_did's services), so it is reached through the SSRF guard.
	discovered bool
}

func (e endpointRef) String() string {
	if e.abs != nil {
		return e.abs.String()
	}
	if e.query != "" {
		return e.path + "?" + e.query
	}
	return e.path
}

// upstreamEndpoints are the upstream's handshake and verify endpoints and
// where they were learned (explicit, well-known, did, default).
type upstreamEndpoints struct {
	handshake, verify endpointRef
	source            string
}

// parseEndpoint reads an endpoint: an absolute http(s) URL, or a reference
// resolved against base when base is set, else a path starting with "/".
func parseEndpoint(s string, base *url.URL) (endpointRef, error) {
	u, err := url.Parse(s)
	if err != nil {
		return endpointRef{}, errors.New("not a URL")
	}
	if u.IsAbs() || u.Host != "" {
		if base != nil && !u.IsAbs() {
			u = base.ResolveReference(u)
		}
		if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
			return endpointRef{}, errors.New("must be an http(s) URL or a path")
		}
		u.Fragment = ""
		return endpointRef{abs: u}, nil
	}
	if base != nil {
		return endpointRef{abs: base.ResolveReference(u)}, nil
	}
	if !strings.HasPrefix(u.Path, "/") {
		return endpointRef{}, errors.New("must be an http(s) URL or a path starting with /")
	}
	return endpointRef{path: u.Path, query: u.RawQuery}, nil
}

// localize turns endpoints on the Level 2 upstream origin into paths, so
// that they are forwarded through the route (reverse_proxy) like any
// request to that upstream, rather than by the edge's own client.
func (h *Handler) localize(eps *upstreamEndpoints) *upstreamEndpoints {
	up := h.l3.upstream
	if up == nil {
		return eps
	}
	for _, e := range []*endpointRef{&eps.handshake, &eps.verify} {
		if e.abs != nil && strings.EqualFold(e.abs.Scheme, up.Scheme) && strings.EqualFold(e.abs.Host, up.Host) {
			p := e.abs.Path
			if p == "" {
				p = "/"
			}
			*e = endpointRef{path: p, query: e.abs.RawQuery}
		}
	}
	return eps
}

// discoveryCache holds the discovered endpoints for discovery_ttl, per
// Host when discovery goes through the route (an upstream may answer per
// Host, and one client's Host must not choose every other client's
// endpoints); one discovery runs at a time per Host, the others wait for
// it.
type discoveryCache struct {
	ttl     time.Duration
	mu      sync.Mutex
	entries map[string]*discoveryEntry // at most maxCachedHosts
}

type discoveryEntry struct {
	cur     *upstreamEndpoints
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

// upstreamEndpoints returns the endpoints to forward to: explicit, else
// cached, else discovered now (see discover).
func (h *Handler) upstreamEndpoints(r *http.Request, next Next) *upstreamEndpoints {
	l := &h.l3
	if l.explicit != nil {
		return l.explicit
	}
	dc := l.discovery
	// With the upstream's origin configured, discovery does not depend on
	// the request; through the route, it does on the Host.
	key := ""
	if l.upstream == nil {
		key = h.serviceHost(r)
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
				return h.defaultEndpoints()
			}
		}
		ch := make(chan struct{})
		de.running = ch
		dc.mu.Unlock()

		eps, ttl := h.discover(r, next)
		dc.mu.Lock()
		de.cur, de.expires, de.running = eps, time.Now().Add(ttl), nil
		dc.mu.Unlock()
		close(ch)
		if c := h.logger.Check(zapcore.DebugLevel, "upstream handshake endpoints discovered"); c != nil {
			c.Write(zap.String("source", eps.source), zap.Stringer("handshake", eps.handshake),
				zap.Stringer("verify", eps.verify), zap.Duration("cached_for", ttl))
		}
		return eps
	}
}

// discover finds the upstream's endpoints, in order: its
// /.well-known/mcp-i.json (from the Level 2 upstream origin, else through
// the route), the mcp-i / JSON-RPC services of upstream_did's document, and
// finally the edge's own handshake paths on the route's upstream. It returns how
// long to cache the result: discovery_ttl, or less when a source failed in
// a way that may pass.
func (h *Handler) discover(r *http.Request, next Next) (*upstreamEndpoints, time.Duration) {
	ttl := h.l3.discovery.ttl
	ctx, cancel := context.WithTimeout(r.Context(), handshakeTimeout)
	defer cancel()

	var (
		doc       *mcpiDocument
		transient bool
	)
	base := h.l3.upstream
	if base != nil {
		wk := base.ResolveReference(&url.URL{Path: wellKnownMCPI})
		doc, transient = h.fetchDocument(ctx, h.l3.client, wk)
		base = wk
	} else {
		doc, transient = h.fetchDocumentNext(ctx, r, next)
	}
	if doc != nil {
		// Only endpoints on the upstream itself: paths of a document that
		// came through the route, or URLs on the configured upstream
		// origin. A document naming another origin would send agents'
		// credentials and the edge's assertions there.
		if eps := doc.endpoints(base, "well-known"); eps != nil {
			if eps = h.localize(eps); eps.handshake.abs == nil && eps.verify.abs == nil {
				return eps, ttl
			}
			if c := h.logger.Check(zapcore.WarnLevel, "upstream mcp-i.json names handshake endpoints on another origin; ignored (set handshake_endpoint to use them)"); c != nil {
				c.Write(zap.Stringer("handshake", eps.handshake), zap.Stringer("verify", eps.verify))
			}
		}
	}
	if transient {
		ttl = min(ttl, discoveryRetry)
	}
	if h.UpstreamDID != "" {
		eps, transient := h.didEndpoints(ctx)
		if eps != nil {
			return h.localize(eps), ttl
		}
		if transient {
			ttl = min(ttl, discoveryRetry)
		}
	}
	return h.defaultEndpoints(), ttl
}

// defaultEndpoints: the edge's own paths, on the route's upstream.
func (h *Handler) defaultEndpoints() *upstreamEndpoints {
	return &upstreamEndpoints{
		handshake: endpointRef{path: h.l3.hsPath},
		verify:    endpointRef{path: h.l3.vfPath},
		source:    "default",
	}
}

// mcpiDocument is /.well-known/mcp-i.json.
type mcpiDocument struct {
	MCPI struct {
		Version          string            `json:"version"`
		Endpoints        map[string]string `json:"endpoints"`
		SupportedMethods []string          `json:"supportedMethods"`
	} `json:"mcp_i"`
}

// endpoints returns the document's handshake and verify endpoints, resolved
// against base (nil: paths on the route's upstream), or nil if it names no
// usable handshake endpoint. A missing verify endpoint is the handshake one.
func (d *mcpiDocument) endpoints(base *url.URL, source string) *upstreamEndpoints {
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
		base = &url.URL{Path: wellKnownMCPI}
	}
	hs, err1 := resolveDiscovered(hsRaw, base)
	vf, err2 := resolveDiscovered(vfRaw, base)
	if err1 != nil || err2 != nil {
		return nil
	}
	return &upstreamEndpoints{handshake: hs, verify: vf, source: source}
}

// resolveDiscovered resolves a discovered reference against base; when base
// is only a path (the document came through the route), the result stays a
// path on the route's upstream unless the reference was absolute.
func resolveDiscovered(ref string, base *url.URL) (endpointRef, error) {
	if base.IsAbs() {
		return parseEndpoint(ref, base)
	}
	u, err := url.Parse(ref)
	if err != nil {
		return endpointRef{}, err
	}
	if u.IsAbs() || u.Host != "" {
		return parseEndpoint(ref, nil)
	}
	return parseEndpoint(base.ResolveReference(u).String(), nil)
}

func parseMCPIDocument(data []byte) *mcpiDocument {
	var d mcpiDocument
	if json.Unmarshal(data, &d) != nil {
		return nil
	}
	return &d
}

// fetchDocument GETs an mcp-i.json with the edge's client. transient is
// true when the failure may pass (network error, 5xx), false when the
// upstream answered that there is none.
func (h *Handler) fetchDocument(ctx context.Context, client *http.Client, u *url.URL) (doc *mcpiDocument, transient bool) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, false
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		if c := h.logger.Check(zapcore.DebugLevel, "fetching upstream mcp-i.json"); c != nil {
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
	return parseMCPIDocument(data), false
}

// fetchDocumentNext GETs /.well-known/mcp-i.json through the rest of the
// route (the same upstream the handshake calls go to), with none of the
// client's headers but Host.
func (h *Handler) fetchDocumentNext(ctx context.Context, r *http.Request, next Next) (doc *mcpiDocument, transient bool) {
	req := r.Clone(ctx)
	req.Method = http.MethodGet
	req.URL.Path, req.URL.RawPath, req.URL.RawQuery = wellKnownMCPI, "", ""
	req.RequestURI = req.URL.RequestURI()
	req.Header = http.Header{"Accept": {"application/json"}}
	req.Body, req.GetBody, req.ContentLength, req.TransferEncoding = http.NoBody, nil, 0, nil
	cw := &captureWriter{resp: capturedResponse{header: make(http.Header)}}
	if err := next(cw, req); err != nil {
		if c := h.logger.Check(zapcore.DebugLevel, "fetching upstream mcp-i.json through the route"); c != nil {
			c.Write(zap.Error(err))
		}
		return nil, true
	}
	switch status := cw.resp.status; {
	case cw.resp.overflow:
		return nil, false
	case status == http.StatusOK || status == 0:
		return parseMCPIDocument(cw.resp.body), false
	default:
		return nil, status >= 500
	}
}

// didEndpoints reads the upstream DID document's services of type mcp-i or
// JSON-RPC. A service's endpoint may be a map with handshake and verify
// members, URLs (one whose service id or path says "verify" is the verify
// endpoint, any other the handshake endpoint, and a lone one both), or the
// URL of an mcp-i.json, which is then fetched.
func (h *Handler) didEndpoints(ctx context.Context) (eps *upstreamEndpoints, transient bool) {
	doc, err := h.l3.resolver.Resolve(ctx, h.UpstreamDID)
	if err != nil || doc == nil {
		if c := h.logger.Check(zapcore.DebugLevel, "resolving upstream_did"); c != nil {
			c.Write(zap.String("did", h.UpstreamDID), zap.Error(err))
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
			case strings.HasSuffix(u.Path, wellKnownMCPI):
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
		d, tr := h.fetchDocument(ctx, h.l3.guarded, u)
		if d != nil {
			if eps := d.endpoints(u, "did"); eps != nil {
				eps.handshake.discovered, eps.verify.discovered = true, true
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
	return &upstreamEndpoints{handshake: hsRef, verify: vfRef, source: "did"}, false
}

func isHandshakeServiceType(types []string) bool {
	for _, t := range types {
		if strings.EqualFold(t, "mcp-i") || strings.EqualFold(t, "JSON-RPC") {
			return true
		}
	}
	return false
}

// edgePathPrefix is the part of the original request path that earlier
// handlers (handle_path, uri strip_prefix) removed, so that the endpoints
// the edge advertises are the ones clients must use.
func (h *Handler) edgePathPrefix(r *http.Request) string {
	_, orig := h.original(r)
	if orig == nil || r.URL == nil {
		return ""
	}
	op, cp := orig.Path, r.URL.Path
	if len(op) > len(cp) && strings.HasSuffix(op, cp) {
		return strings.TrimSuffix(op[:len(op)-len(cp)], "/")
	}
	return ""
}

// mcpiDocOut is the edge's /.well-known/mcp-i.json.
type mcpiDocOut struct {
	MCPI struct {
		Version          string            `json:"version"`
		Endpoints        map[string]string `json:"endpoints"`
		SupportedMethods []string          `json:"supportedMethods"`
	} `json:"mcp_i"`
}

// serveMCPIDocument answers /.well-known/mcp-i.json. The endpoints are the
// edge's handshake paths in both modes: when terminating they are the
// edge's own; when proxying they are the upstream's endpoints as reached
// through the edge, which forwards them (so that the agent never bypasses
// the edge's checks). The methods are those the edge verifies.
func (h *Handler) serveMCPIDocument(w http.ResponseWriter, r *http.Request) {
	prefix := h.edgePathPrefix(r)
	var doc mcpiDocOut
	doc.MCPI.Version = mcpiDocVersion
	doc.MCPI.Endpoints = map[string]string{
		"handshake": prefix + h.l3.hsPath,
		"verify":    prefix + h.l3.vfPath,
	}
	doc.MCPI.SupportedMethods = h.l3.service.SupportedMethods()
	body, _ := json.Marshal(doc)
	writeJSON(w, http.StatusOK, body, "public, max-age=300")
}

// handshakeServices returns the service entries that announce the edge's
// handshake in its did:web document (Level 2 serves did.json): one service
// "<edgeDID>#mcp-i" of type mcp-i whose endpoint maps handshake and verify
// to their absolute URLs on the host r was sent to. Nil below level 3.
func (h *Handler) handshakeServices(r *http.Request, edgeDID string) []assertion.Service {
	if !h.l3.enabled {
		return nil
	}
	base := h.requestScheme(r) + "://" + h.serviceHost(r) + h.edgePathPrefix(r)
	return []assertion.Service{{
		ID:   edgeDID + "#mcp-i",
		Type: "mcp-i",
		ServiceEndpoint: map[string]string{
			"handshake": base + h.l3.hsPath,
			"verify":    base + h.l3.vfPath,
		},
	}}
}

// ValidEndpoint checks a handshake_endpoint or verify_endpoint setting: a
// path, or an absolute http(s) URL.
func ValidEndpoint(s string) error {
	_, err := parseEndpoint(s, nil)
	return err
}
