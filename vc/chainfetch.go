package vc

import (
	"bytes"
	"container/list"
	"context"
	"errors"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/mcpi-edge/caddy-mcpi/didresolver"
)

// Fetched ancestors [ours]. Besides a presentation and a chain carrier
// (WithAncestors), a chain's parent may come from a URL its child names,
// when the Verifier is given WithChainFetch:
//
//   - The URL is credentialSubject.delegation.parentCredentialUrl [ours],
//     else delegation.parentId when it is itself an https URL. KYA-OS and
//     MCP-I name a parent by parentId only (an identifier, resolved from a
//     registry the specs do not define), so the field is ours. The URL says
//     where the parent is; what it is stays delegation.parentId: the
//     credential fetched must be the one parentId names (its delegation id
//     or credential id), like any ancestor given, else ErrChain.
//   - A parent is fetched only when it is needed: its child names it, it
//     was not given, and the child's issuer is not trusted directly (a
//     chain may stop at a directly trusted issuer; see chainOf). With
//     AnyIssuer nothing is ever fetched.
//   - The URL must be https, without user info, dot segments or
//     backslashes, at most 2048 bytes, and lie under one of the allowed
//     prefixes: same host and port, path under the prefix's path. A URL
//     that does not qualify is not fetched: the parent was not given
//     (ErrChainIncomplete), as when fetching is off.
//   - It is fetched with GET through the SSRF guard of status lists and
//     did:web (didresolver.GuardedClient: addresses checked after name
//     resolution, no proxy), without following redirects, within the
//     timeout and the size cap. Any failure to get a 2xx answer of a
//     credential media type within the bounds is ErrChainFetch.
//   - The body is a credential: a VC-JWT, a JSON credential, a JSON string
//     holding a VC-JWT, or an EnvelopedVerifiableCredential, told apart by
//     its first byte; the Content-Type, if given, must be a credential,
//     JWT, JSON or plain type. A body that is no credential, or a
//     presentation, is refused like a malformed ancestor (ErrMalformed).
//   - What was fetched is verified like every other ancestor, every time
//     (chainOf: signature by a key of its issuer's assertionMethod, type,
//     window, audience, trust of the root, the link rules, status): being
//     fetched, from wherever, proves nothing.
//   - Bodies are cached per URL for the cache TTL, failures for 5s (or the
//     TTL if shorter), in an LRU of 1024 URLs and 16 MiB; one fetch runs
//     per URL, at most 32 at once. A chain fetches at most one credential
//     per link it lacks, so at most MaxChainDepth-1 per Verify; a URL met
//     twice in one chain is a cycle (ErrChain).

const (
	defaultFetchTimeout  = 5 * time.Second
	defaultFetchMaxSize  = 64 << 10
	defaultFetchCacheTTL = 5 * time.Minute
	fetchNegativeTTL     = 5 * time.Second
	maxFetchEntries      = 1024
	maxFetchCacheBytes   = 16 << 20
	maxFetchesInFlight   = 32
	maxFetchURL          = 2048
)

// ChainFetch configures fetching a chain's missing parents from the URL
// their child names (WithChainFetch).
type ChainFetch struct {
	// Allow lists the URL prefixes parents may be fetched from, each an
	// https URL without query or fragment whose path ends with "/"
	// (https://creds.example.com/ allows the whole host). Required: a
	// prefix that is not valid (see CheckFetchPrefix) allows nothing, and
	// with no valid prefix nothing is fetched.
	Allow []string
	// Client fetches (nil: a default one). Unless AllowPrivate, it goes
	// through the SSRF guard (didresolver.GuardedClient); a client whose
	// transport cannot be guarded makes every fetch fail closed.
	Client *http.Client
	// AllowPrivate lets fetches reach loopback and private addresses (tests
	// and development).
	AllowPrivate bool
	// Timeout of one fetch. Default 5s.
	Timeout time.Duration
	// MaxSize caps a fetched body, in bytes. Default 64 KiB.
	MaxSize int
	// CacheTTL is how long a fetched body is reused. Default 5 minutes.
	// It is verified on every use all the same.
	CacheTTL time.Duration
}

// WithChainFetch lets the Verifier fetch a chain's missing parent from the
// https URL its child names, under the rules of chainfetch.go. Off by
// default. The last WithChainFetch wins.
func WithChainFetch(cfg ChainFetch) Option {
	return func(v *Verifier) {
		c := cfg
		c.Allow = append([]string(nil), cfg.Allow...)
		v.fetchCfg = &c
	}
}

// fetchPrefix is one allowed prefix: host (lower case, with the port
// unless it is 443) and path (decoded, ending with "/").
type fetchPrefix struct{ host, path string }

// CheckFetchPrefix reports whether p is a valid ChainFetch.Allow entry: an
// absolute https URL with a host, without user info, query or fragment,
// whose path ends with "/" and has no dot segments.
func CheckFetchPrefix(p string) error {
	_, err := parseFetchPrefix(p)
	return err
}

func parseFetchPrefix(s string) (fetchPrefix, error) {
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return fetchPrefix{}, errors.New("not a URL")
	case u.Scheme != "https" || u.Host == "" || u.Opaque != "":
		return fetchPrefix{}, errors.New("not an absolute https URL")
	case u.User != nil:
		return fetchPrefix{}, errors.New("has user info")
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return fetchPrefix{}, errors.New("has a query or fragment")
	}
	p := u.Path
	if p == "" {
		p = "/"
	}
	if !strings.HasSuffix(p, "/") {
		return fetchPrefix{}, errors.New(`path must end with "/"`)
	}
	if hasDotSegment(p) {
		return fetchPrefix{}, errors.New("path has dot segments or backslashes")
	}
	return fetchPrefix{host: hostKey(u), path: p}, nil
}

// hostKey is u's host for comparison: lower case, with the port unless
// it is 443.
func hostKey(u *url.URL) string {
	h := strings.ToLower(u.Hostname())
	if strings.Contains(h, ":") {
		h = "[" + h + "]" // IPv6 literal
	}
	if port := u.Port(); port != "" && port != "443" {
		h += ":" + port
	}
	return h
}

// hasDotSegment reports whether a decoded path could step out of an
// allowed prefix on the server: a "." or ".." segment; a backslash (some
// servers take it for a slash); a ';' (Tomcat, Jetty and Spring read
// "..;" as ".."); or a '%' left after decoding (servers that decode twice
// read "%2e%2e" as "..").
func hasDotSegment(p string) bool {
	if strings.ContainsAny(p, "\\;%") {
		return true
	}
	for seg := range strings.SplitSeq(p, "/") {
		if seg == "." || seg == ".." {
			return true
		}
	}
	return false
}

// parentURL returns the URL where p's parent may be fetched from: its
// delegation.parentCredentialUrl, else its parentId when that is an https
// URL; "" when it names none.
func (p *parsed) parentURL() string {
	if d := p.subject.Delegation; d != nil && d.ParentURL != "" {
		return d.ParentURL
	}
	if len(p.parentID) > len("https://") && strings.EqualFold(p.parentID[:len("https://")], "https://") {
		return p.parentID
	}
	return ""
}

// chainFetcher fetches and caches parent credentials for one Verifier.
type chainFetcher struct {
	v        *Verifier // its clock
	client   *http.Client
	setupErr error // the client could not be guarded: fail closed
	allow    []fetchPrefix
	timeout  time.Duration
	maxSize  int
	ttl      time.Duration
	negTTL   time.Duration
	slots    chan struct{} // fetches in flight
	flights  singleflight.Group

	mu      sync.Mutex
	entries map[string]*list.Element // of *fetchEntry, most recent first
	lru     *list.List
	bytes   int
}

// fetchEntry is the cached outcome of fetching one URL.
type fetchEntry struct {
	url   string
	body  []byte // credential bytes; nil on failure
	err   error
	until time.Time
}

func newChainFetcher(v *Verifier, cfg ChainFetch) *chainFetcher {
	f := &chainFetcher{
		v:       v,
		timeout: cfg.Timeout,
		maxSize: cfg.MaxSize,
		ttl:     cfg.CacheTTL,
		slots:   make(chan struct{}, maxFetchesInFlight),
		entries: map[string]*list.Element{},
		lru:     list.New(),
	}
	if f.timeout <= 0 {
		f.timeout = defaultFetchTimeout
	}
	if f.maxSize <= 0 {
		f.maxSize = defaultFetchMaxSize
	}
	if f.ttl <= 0 {
		f.ttl = defaultFetchCacheTTL
	}
	f.negTTL = min(f.ttl, fetchNegativeTTL)
	for _, s := range cfg.Allow {
		if p, err := parseFetchPrefix(s); err == nil {
			f.allow = append(f.allow, p)
		}
	}
	f.client, f.setupErr = didresolver.GuardedClient(cfg.Client, cfg.AllowPrivate, f.timeout)
	return f
}

// allowed returns the URL to fetch for raw, normalized (fragment dropped),
// or false when raw may not be fetched.
func (f *chainFetcher) allowed(raw string) (string, bool) {
	if len(raw) > maxFetchURL {
		return "", false
	}
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil || u.Opaque != "" || hasDotSegment(u.Path) {
		return "", false
	}
	u.Fragment, u.RawFragment = "", ""
	host, path := hostKey(u), u.Path
	if path == "" {
		path = "/"
	}
	for _, p := range f.allow {
		if p.host == host && strings.HasPrefix(path, p.path) {
			return u.String(), true
		}
	}
	return "", false
}

// fetchParent returns cur's parent from the URL cur names, parsed but not
// verified; nil when there is nothing to fetch: fetching is off, cur names
// no URL, or cur's issuer is trusted directly (the chain may stop there).
// depth is the number of credentials linked so far; seen holds the URLs
// fetched for this chain.
func (v *Verifier) fetchParent(ctx context.Context, cur *parsed, depth int, seen map[string]bool) (*parsed, error) {
	f := v.fetch
	if f == nil || v.trusts(cur.d.Issuer) {
		return nil, nil
	}
	raw := cur.parentURL()
	if raw == "" {
		return nil, nil
	}
	u, ok := f.allowed(raw)
	if !ok {
		return nil, fail(ErrChainIncomplete, "parent credential URL not allowed")
	}
	if depth >= v.maxDepth {
		return nil, fail(ErrChain, "chain deeper than allowed")
	}
	if seen[u] {
		return nil, fail(ErrChain, "credentials form a cycle")
	}
	seen[u] = true
	body, err := f.get(ctx, u)
	if err != nil {
		return nil, err
	}
	p, err := v.parseCredential(body)
	if err != nil {
		return nil, within(err, "fetched ancestor credential")
	}
	if !p.names(cur.parentID) {
		return nil, fail(ErrChain, "fetched credential is not the parent named")
	}
	return p, nil
}

// get returns the credential at u, from the cache or fetched; one fetch
// runs per URL, and it outlives a caller that gives up (others may wait
// for it; it is bounded by the timeout).
func (f *chainFetcher) get(ctx context.Context, u string) ([]byte, error) {
	if f.setupErr != nil {
		return nil, &verifyError{kind: ErrChainFetch, detail: "client cannot be guarded", cause: didresolver.ErrForbiddenAddress}
	}
	if e := f.cached(u); e != nil {
		return e.body, e.err
	}
	ch := f.flights.DoChan(u, func() (any, error) {
		body, cache, err := f.fetchURL(context.WithoutCancel(ctx), u)
		if cache {
			f.store(u, body, err)
		}
		return body, err
	})
	select {
	case r := <-ch:
		if r.Err != nil {
			return nil, r.Err
		}
		return r.Val.([]byte), nil
	case <-ctx.Done():
		return nil, &verifyError{kind: ErrChainFetch, detail: "fetch aborted", cause: ctx.Err()}
	}
}

// cached returns the live entry for u, or nil. Entries are never
// changed once stored.
func (f *chainFetcher) cached(u string) *fetchEntry {
	now := f.v.now()
	f.mu.Lock()
	defer f.mu.Unlock()
	el := f.entries[u]
	if el == nil {
		return nil
	}
	e := el.Value.(*fetchEntry)
	if !now.Before(e.until) {
		f.remove(el)
		return nil
	}
	f.lru.MoveToFront(el)
	return e
}

// store caches the outcome of fetching u, evicting the least recently
// used entries beyond the bounds.
func (f *chainFetcher) store(u string, body []byte, err error) {
	ttl := f.ttl
	if err != nil {
		ttl = f.negTTL
	}
	e := &fetchEntry{url: u, body: body, err: err, until: f.v.now().Add(ttl)}
	f.mu.Lock()
	defer f.mu.Unlock()
	if el := f.entries[u]; el != nil {
		f.remove(el)
	}
	f.entries[u] = f.lru.PushFront(e)
	f.bytes += len(body)
	for f.lru.Len() > 0 && (f.lru.Len() > maxFetchEntries || f.bytes > maxFetchCacheBytes) {
		f.remove(f.lru.Back())
	}
}

// remove drops an entry. f.mu is held.
func (f *chainFetcher) remove(el *list.Element) {
	e := f.lru.Remove(el).(*fetchEntry)
	delete(f.entries, e.url)
	f.bytes -= len(e.body)
}

// fetchURL gets the credential at u. cache is false for outcomes that say
// nothing about u (no free slot).
func (f *chainFetcher) fetchURL(ctx context.Context, u string) (body []byte, cache bool, err error) {
	select {
	case f.slots <- struct{}{}:
		defer func() { <-f.slots }()
	default:
		return nil, false, fail(ErrChainFetch, "too many fetches in flight")
	}
	b, ct, err := docFetch{
		client: f.client, timeout: f.timeout, maxSize: int64(f.maxSize),
		accept: "application/vc+jwt, application/vc+ld+json, application/vc, application/jwt;q=0.9, application/json;q=0.8",
		kind:   ErrChainFetch, what: "parent credential",
	}.get(ctx, u)
	if errors.Is(err, errFetchURL) {
		return nil, true, fail(ErrChainFetch, "bad URL")
	}
	if err != nil {
		return nil, true, err
	}
	if !credentialMediaType(ct) {
		return nil, true, fail(ErrChainFetch, "not a credential media type")
	}
	b = trimSpace(b)
	if len(b) > 0 && (b[0] == '"' || b[0] == '{') {
		// A JSON string holding a VC-JWT, an enveloped VC-JWT or a JSON
		// credential, as an entry of a presentation would be.
		if b, err = credentialBytes(b); err != nil {
			return nil, true, within(err, "fetched ancestor credential")
		}
	}
	return bytes.Clone(b), true, nil
}

// credentialMediaType reports whether a fetched body's Content-Type may
// hold a credential: none, or a credential, JWT, JSON or plain type.
func credentialMediaType(ct string) bool {
	if ct == "" {
		return true
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	switch mt {
	case "application/vc+jwt", "application/vc-ld+jwt", "application/jwt",
		"application/vc+ld+json", "application/vc", "application/vc+json",
		"application/json", "application/ld+json",
		"text/plain", "application/octet-stream":
		return true
	}
	return false
}
