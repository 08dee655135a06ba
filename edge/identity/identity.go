// Package identity tells MCP-I-aware upstreams who is calling (MCP-I
// Level 2): the identity headers, the signed assertion (assertion/), the
// agent's reputation, and the edge's published keys. It signs with a key
// set from a file or from shared storage, reloaded so that every replica
// signs with, and publishes, the same keys; with upstream_mcpi auto it
// probes whether the upstream declares MCP-I support.
package identity

import (
	"context"
	"crypto"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/mcpi-edge/caddy-mcpi/assertion"
	"github.com/mcpi-edge/caddy-mcpi/edge/carrier"
	"github.com/mcpi-edge/caddy-mcpi/vc"
)

// The request headers Inject sets (canonical names). The X-* ones are also
// stripped by carrier.Reader.StripIdentity; Inject strips them again right
// before setting them, in every spelling.
const (
	HeaderAgentDID           = "X-Agent-Did"
	HeaderUserDID            = "X-User-Did"
	HeaderReputation         = "X-Agent-Reputation-Score"
	HeaderVerifiedDelegation = "X-Verified-Delegation"
	HeaderKYAOSAgentDID      = "Kya-Os-Agent-Did"
	HeaderKYAOSProof         = "Kya-Os-Delegation-Proof"
)

// Headers are the headers Inject sets, canonical: the ones a handshake call
// to another origin may carry.
var Headers = []string{
	HeaderAgentDID, HeaderUserDID, HeaderVerifiedDelegation, HeaderReputation, HeaderKYAOSAgentDID, HeaderKYAOSProof,
}

// injectedLower are Headers lower case with '-', as carrier.HeaderIs
// compares them.
var injectedLower = []string{
	"x-agent-did", "x-user-did", "x-agent-reputation-score", "x-verified-delegation",
	"kya-os-agent-did", "kya-os-delegation-proof",
}

// ErrUnavailable: the edge could not produce its identity headers (no
// signing key, no usable host for its DID, a signing failure). It is the
// edge's fault, not the client's: edge maps it to 500.
var ErrUnavailable = errors.New("edge identity unavailable")

// ErrNoHost: the request names no Host the edge DID can be derived from
// (it wraps ErrUnavailable). Serving the edge's keys for it is a 400.
var ErrNoHost = fmt.Errorf("%w: no usable Host for the edge DID", ErrUnavailable)

// Identity is Level 2 for one configuration. It is safe for concurrent use;
// Close stops its background work.
type Identity struct {
	logger *zap.Logger
	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// What the host knows about a request (options).
	host           func(*http.Request) string
	scheme         func(*http.Request) string
	upstreamHeader func(*http.Request, string) (string, bool)
	services       func(r *http.Request, edgeDID string) []assertion.Service
	storage        assertion.Storage // where a generated key set is kept

	lifetime, retention, reloadEvery time.Duration
	skew                             time.Duration // the verifier's clock skew
	alg                              string
	hashForm, reuse                  bool
	mcpiHeaders, kyaHeaders          bool
	fixedDID                         string // configured edge_did
	didDocPath                       string // where did.json is served; "" for none
	aud, kyaAud                      string // configured audiences; "" = from the request
	off                              bool   // upstream_mcpi off

	ks         atomic.Pointer[assertion.KeySet]
	store      assertion.Storage // nil for a key from a file or without storage
	storageKey string
	reloadMu   sync.Mutex
	lastLoad   time.Time // guarded by reloadMu
	// The thumbprints of the signing and the scheduled key at the last
	// reload, for logging their changes; guarded by reloadMu.
	loggedCurrent, loggedNext string

	signersMu sync.RWMutex
	signers   map[string]*assertion.Signer // by edge DID

	namesMu sync.RWMutex
	names   map[string]*hostNames // by Host, at most maxCachedHosts

	probe *upstreamProbe    // upstream_mcpi auto only
	rep   *reputationSource // nil without a reputation source
}

// maxCachedHosts bounds the per-Host names: the Host is the client's choice.
const maxCachedHosts = 64

// New validates c, loads the signing keys and starts what c asks for (key
// reloads, the upstream probe). Its background work ends with ctx or Close.
func New(ctx context.Context, c Config, opts ...Option) (*Identity, error) {
	// A bad config must not touch the storage first.
	if err := c.Validate(); err != nil {
		return nil, err
	}
	rctx, cancel := context.WithCancel(ctx)
	id := &Identity{
		logger:      zap.NewNop(),
		ctx:         rctx,
		cancel:      cancel,
		host:        func(r *http.Request) string { return r.Host },
		scheme:      defaultScheme,
		lifetime:    c.assertionTTL(),
		retention:   c.keyRetention(),
		reloadEvery: c.keyReloadInterval(),
		alg:         c.signingAlg(),
		hashForm:    c.AssertionForm == FormHash,
		reuse:       c.AssertionReuse == nil || *c.AssertionReuse,
		mcpiHeaders: c.HeaderProfile != ProfileKYAOS,
		kyaHeaders:  c.HeaderProfile == ProfileKYAOS || c.HeaderProfile == ProfileBoth,
		fixedDID:    c.EdgeDID,
		off:         c.upstreamMode() == UpstreamMCPIOff,
		signers:     make(map[string]*assertion.Signer),
	}
	for _, o := range opts {
		o(id)
	}
	if err := id.start(&c); err != nil {
		_ = id.Close()
		return nil, err
	}
	return id, nil
}

// start loads the keys and starts the reputation source and the probe.
func (id *Identity) start(c *Config) error {
	if id.fixedDID == "" {
		id.didDocPath = "/.well-known/did.json"
	} else if p, ok := edgeDIDDocPath(id.fixedDID); ok {
		id.didDocPath = p
	}
	if c.Upstream != "" {
		u, _ := ParseUpstreamOrigin(c.Upstream) // checked by Validate
		id.aud, id.kyaAud = u.String(), u.Host
	}

	if err := id.loadKeys(id.ctx, c, id.storage); err != nil {
		return err
	}
	if id.fixedDID != "" {
		// Fail at startup, not on the first request.
		if _, err := id.signerFor(id.fixedDID); err != nil {
			return fmt.Errorf("mcpi: edge signer: %v", err)
		}
	}
	if c.Reputation != nil {
		rep, err := newReputationSource(id.ctx, c.Reputation, id.logger)
		if err != nil {
			return err
		}
		id.rep = rep
	}
	if c.upstreamMode() == UpstreamMCPIAuto {
		u, _ := ParseUpstreamOrigin(c.Upstream)
		ttl := time.Duration(c.MCPIProbeTTL)
		if ttl == 0 {
			ttl = defaultMCPIProbeTTL
		}
		id.probe = newUpstreamProbe(id.ctx, &id.wg, u, ttl, id.logger)
		id.probe.start() // learn before the first request, if we can
	}
	return nil
}

// defaultScheme is the scheme of r without a proxy in front: https over TLS.
func defaultScheme(r *http.Request) string {
	if r.TLS != nil {
		return "https"
	}
	return "http"
}

// signerFor returns the Signer for an edge DID, creating it on first use.
// Derived DIDs (one per Host) are bounded: past maxSigners one is dropped.
func (id *Identity) signerFor(did string) (*assertion.Signer, error) {
	id.signersMu.RLock()
	s := id.signers[did]
	id.signersMu.RUnlock()
	if s != nil {
		return s, nil
	}
	id.signersMu.Lock()
	defer id.signersMu.Unlock()
	if s := id.signers[did]; s != nil {
		return s, nil
	}
	cacheSize := assertion.DefaultReuseCacheSize
	if id.fixedDID == "" {
		cacheSize = derivedReuseCacheSize
		if len(id.signers) >= maxSigners {
			for k := range id.signers {
				delete(id.signers, k)
				break
			}
		}
	}
	s, err := assertion.New(id.ks.Load(), did,
		assertion.WithLifetime(id.lifetime),
		assertion.WithClockSkew(id.skew),
		assertion.WithReuse(id.reuse),
		assertion.WithReuseCacheSize(cacheSize))
	if err != nil {
		return nil, err
	}
	id.signers[did] = s
	return s, nil
}

const (
	// maxSigners bounds the per-Host signers when the edge DID is derived
	// from the Host; derivedReuseCacheSize bounds each one's reuse cache.
	maxSigners            = 32
	derivedReuseCacheSize = 1024
)

// edgeDID is the configured edge DID, else did:web:<host> (lower case, the
// port's colon %3A-encoded, as edge.requestAudiences derives it).
func (id *Identity) edgeDID(host string) (string, error) {
	if id.fixedDID != "" {
		return id.fixedDID, nil
	}
	if host == "" || strings.ContainsAny(host, "#?/ ") {
		return "", ErrNoHost
	}
	return "did:web:" + strings.ReplaceAll(strings.ToLower(host), ":", "%3A"), nil
}

// hostNames are the names Inject uses for one Host, kept so that a
// request does not build them again.
type hostNames struct {
	did  string    // edgeDID(host)
	host string    // the host in lower case (the KYA-OS audience)
	aud  [2]string // the assertion audience over http and over https
}

// namesFor returns the names for host, built on first use. Hosts are the
// client's choice, so at most maxCachedHosts are kept.
func (id *Identity) namesFor(host string) (*hostNames, error) {
	id.namesMu.RLock()
	n := id.names[host]
	id.namesMu.RUnlock()
	if n != nil {
		return n, nil
	}
	did, err := id.edgeDID(host)
	if err != nil {
		return nil, err
	}
	lower := strings.ToLower(host)
	n = &hostNames{did: did, host: lower, aud: [2]string{"http://" + lower, "https://" + lower}}
	id.namesMu.Lock()
	if len(id.names) >= maxCachedHosts || id.names == nil {
		id.names = make(map[string]*hostNames, maxCachedHosts)
	}
	id.names[host] = n
	id.namesMu.Unlock()
	return n, nil
}

// Inject sets the Level 2 headers on the request going upstream. Call it
// only after d verified and the client's identity headers were stripped.
// An upstream that has not declared MCP-I support gets nothing (Level 1
// behaviour). Its errors are ErrUnavailable (the edge's fault) or the
// client's: assertion.ErrDelegationExpired, assertion.ErrInvalidDelegation.
func (id *Identity) Inject(r *http.Request, d *vc.Delegation) error {
	// Strip again, every spelling, whatever happens next: only the edge's
	// own values may reach the upstream.
	StripInjected(r.Header)
	if id.off {
		return nil
	}
	if id.probe != nil {
		id.probe.observe(r, id.upstreamHeader)
		if !id.probe.declared(r.Context()) {
			return nil
		}
	}
	names, err := id.namesFor(id.host(r))
	if err != nil {
		return err
	}
	signer, err := id.signerFor(names.did)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	hdr := r.Header
	if id.mcpiHeaders {
		var proof string
		if id.hashForm {
			proof = d.HashRef()
		} else {
			aud := id.aud
			if aud == "" {
				aud = names.aud[0]
				if id.scheme(r) == "https" {
					aud = names.aud[1]
				}
			}
			if proof, err = signer.Sign(d, aud); err != nil {
				return assertionSignError(err)
			}
		}
		// One backing array for the three values, each capped so that
		// adding a value to one header copies it instead of writing over
		// the next.
		vals := []string{d.AgentDID, d.UserDID, proof}
		hdr[HeaderAgentDID] = vals[0:1:1]
		hdr[HeaderUserDID] = vals[1:2:2]
		hdr[HeaderVerifiedDelegation] = vals[2:3:3]
	}
	if id.kyaHeaders {
		aud := id.kyaAud
		if aud == "" {
			aud = names.host
		}
		proof, err := signer.SignKYAOSProof(d, aud, nil)
		if err != nil {
			return assertionSignError(err)
		}
		hdr[HeaderKYAOSAgentDID] = []string{d.AgentDID}
		hdr[HeaderKYAOSProof] = []string{proof}
	}
	if id.rep != nil {
		if score, ok := id.rep.score(r.Context(), d.AgentDID); ok {
			hdr[HeaderReputation] = []string{score}
		}
	}
	return nil
}

// assertionSignError keeps the errors the client caused (an expired or unusable
// delegation) and makes every other one the edge's.
func assertionSignError(err error) error {
	if errors.Is(err, assertion.ErrDelegationExpired) || errors.Is(err, assertion.ErrInvalidDelegation) {
		return err
	}
	return fmt.Errorf("%w: %v", ErrUnavailable, err)
}

// StripInjected deletes every spelling of the headers Inject sets.
func StripInjected(h http.Header) {
	for k := range h {
		if len(k) < len("x-user-did") {
			continue
		}
		switch k[0] {
		case 'x', 'X', 'k', 'K':
		default:
			continue
		}
		if carrier.HeaderIs(k, injectedLower...) {
			delete(h, k)
		}
	}
}

// SigningKey is the edge's current signing key under its DID for host, and
// the key id its did.json publishes it under: what signs the edge's
// KYA-OS response proofs, so that a client verifies them against the same
// document as the Level 2 assertion.
func (id *Identity) SigningKey(host string) (did, kid string, key crypto.Signer, err error) {
	if did, err = id.edgeDID(host); err != nil {
		return "", "", nil, err
	}
	s, err := id.signerFor(did)
	if err != nil {
		return "", "", nil, err
	}
	k := s.KeySet().Current()
	if k.Signer == nil {
		return "", "", nil, ErrUnavailable
	}
	return did, k.KeyID(did), k.Signer, nil
}
