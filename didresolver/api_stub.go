package didresolver

// CONTRACT STUB: the didresolver helper replaces this file with real
// implementations spread over document.go, key.go, web.go, jwk.go, cache.go.
// Signatures here are the contract other packages code against; keep them.

import (
	"context"
	"crypto"
	"net/http"
	"time"
)

// Document is a DID document (W3C DID Core), reduced to what verification needs.
type Document struct {
	Context            any                  `json:"@context,omitempty"`
	ID                 string               `json:"id"`
	Controller         any                  `json:"controller,omitempty"`
	VerificationMethod []VerificationMethod `json:"verificationMethod,omitempty"`
	Authentication     []MethodRef          `json:"authentication,omitempty"`
	AssertionMethod    []MethodRef          `json:"assertionMethod,omitempty"`
	Service            []Service            `json:"service,omitempty"`
}

// MethodRef is an entry of a verification relationship: either a reference
// (a string id, absolute or relative "#frag") or an embedded method.
type MethodRef struct {
	Ref      string
	Embedded *VerificationMethod
}

// VerificationMethod is one key of a DID document.
type VerificationMethod struct {
	ID                 string         `json:"id"`
	Type               string         `json:"type"`
	Controller         string         `json:"controller,omitempty"`
	PublicKeyJwk       map[string]any `json:"publicKeyJwk,omitempty"`
	PublicKeyMultibase string         `json:"publicKeyMultibase,omitempty"`
	PublicKeyBase58    string         `json:"publicKeyBase58,omitempty"`
}

// Service is a service entry of a DID document. Type may be a string or a
// list of strings in JSON; Types returns it normalised.
type Service struct {
	ID              string `json:"id"`
	Type            any    `json:"type"`
	ServiceEndpoint any    `json:"serviceEndpoint"`
}

// DID is a parsed DID: "did:<Method>:<ID>" with optional fragment.
type DID struct {
	Method   string // "key", "web", "jwk"
	ID       string // method-specific id
	Fragment string // without '#', may be empty
}

// String returns "did:<method>:<id>" (without fragment).
func (d DID) String() string { panic("stub") }

// ParseDID parses a DID or DID URL with an optional fragment.
func ParseDID(s string) (DID, error) { panic("stub") }

// ParseDocument parses and structurally validates a DID document.
func ParseDocument(data []byte) (*Document, error) { panic("stub") }

// Key returns the key with verification method id kid (absolute, or relative
// "#frag" against d.ID), which must be listed under rel.
func (d *Document) Key(kid string, rel Relationship) (Key, error) { panic("stub") }

// Keys returns every usable key listed under rel, in document order.
func (d *Document) Keys(rel Relationship) []Key { panic("stub") }

// PublicKey decodes the method's key (publicKeyJwk, publicKeyMultibase or
// publicKeyBase58).
func (m *VerificationMethod) PublicKey() (crypto.PublicKey, error) { panic("stub") }

// Types returns the service's type(s).
func (s Service) Types() []string { panic("stub") }

// Endpoints returns the service's endpoint URL(s) (string, list or map forms).
func (s Service) Endpoints() []string { panic("stub") }

// ResolveKey resolves the DID of kid ("did:…#frag") and returns that key,
// which must be authorized for rel. If kid has no fragment, the document
// must authorize exactly one key for rel. When the key id is unknown and r is
// a Refresher, the document is refreshed once and the lookup retried.
func ResolveKey(ctx context.Context, r Resolver, kid string, rel Relationship) (Key, error) {
	panic("stub")
}

// KeyDID returns the did:key DID and its verification method id for a public
// key (ed25519.PublicKey, *ecdsa.PublicKey P-256, *secp256k1.PublicKey).
func KeyDID(pub crypto.PublicKey) (did, kid string, err error) { panic("stub") }

// JWKDID returns the did:jwk DID for a public key.
func JWKDID(pub crypto.PublicKey) (string, error) { panic("stub") }

// Option configures New.
type Option func(*options)

type options struct {
	httpClient          *http.Client
	timeout             time.Duration
	maxDocumentSize     int64
	allowPrivateAddress bool
	allowHTTP           bool
}

// WithHTTPClient sets the client used for did:web (its Transport's dialer is
// wrapped with the SSRF guard unless private addresses are allowed).
func WithHTTPClient(c *http.Client) Option { panic("stub") }

// WithTimeout bounds one did:web fetch. Default 5s.
func WithTimeout(d time.Duration) Option { panic("stub") }

// WithMaxDocumentSize caps a fetched document. Default 64 KiB.
func WithMaxDocumentSize(n int64) Option { panic("stub") }

// WithAllowPrivateAddresses lets did:web reach loopback and private
// addresses. For tests and private deployments only.
func WithAllowPrivateAddresses(allow bool) Option { panic("stub") }

// WithAllowHTTP lets did:web use plain http (only together with private
// addresses; for tests).
func WithAllowHTTP(allow bool) Option { panic("stub") }

// New returns a resolver for did:key, did:jwk and did:web.
func New(opts ...Option) Resolver { panic("stub") }

// CacheOption configures NewCache.
type CacheOption func(*Cache)

// Cache wraps a Resolver with a bounded TTL cache, a negative cache, one
// fetch in flight per DID, and rate-limited Refresh. It implements Resolver
// and Refresher.
type Cache struct{}

// WithTTL: how long a resolved document is kept. Default 5m.
func WithTTL(d time.Duration) CacheOption { panic("stub") }

// WithNegativeTTL: how long a failure is remembered. Default 30s.
func WithNegativeTTL(d time.Duration) CacheOption { panic("stub") }

// WithMaxEntries bounds the cache. Default 10000.
func WithMaxEntries(n int) CacheOption { panic("stub") }

// WithRefreshInterval: minimum time between two Refresh fetches of one DID. Default 30s.
func WithRefreshInterval(d time.Duration) CacheOption { panic("stub") }

// WithCacheClock injects a clock.
func WithCacheClock(now func() time.Time) CacheOption { panic("stub") }

// NewCache wraps next.
func NewCache(next Resolver, opts ...CacheOption) *Cache { panic("stub") }

// Resolve implements Resolver.
func (c *Cache) Resolve(ctx context.Context, did string) (*Document, error) { panic("stub") }

// Refresh implements Refresher.
func (c *Cache) Refresh(ctx context.Context, did string) (*Document, error) { panic("stub") }

// KeyType names a key type for GenerateKey.
type KeyType string

const (
	Ed25519   KeyType = "ed25519"
	P256      KeyType = "p256"
	Secp256k1 KeyType = "secp256k1"
)

// GenerateKey returns a new private key: ed25519.PrivateKey,
// *ecdsa.PrivateKey (P-256) or *secp256k1.PrivateKey.
func GenerateKey(t KeyType) (crypto.PrivateKey, error) { panic("stub") }

// PublicKeyOf returns the public half of a private key from GenerateKey or
// ParsePrivateJWK.
func PublicKeyOf(priv crypto.PrivateKey) (crypto.PublicKey, error) { panic("stub") }

// MarshalPrivateJWK encodes a private key as a JWK (OKP Ed25519, EC P-256,
// EC secp256k1) with the given kid.
func MarshalPrivateJWK(priv crypto.PrivateKey, kid string) ([]byte, error) { panic("stub") }

// ParsePrivateJWK decodes a private JWK written by MarshalPrivateJWK (or any
// OKP/EC JWK of those curves) and returns the key and its kid.
func ParsePrivateJWK(data []byte) (priv crypto.PrivateKey, kid string, err error) { panic("stub") }

// PublicJWK encodes a public key as a JWK map (for JWKS and did:web docs).
func PublicJWK(pub crypto.PublicKey) (map[string]any, error) { panic("stub") }
