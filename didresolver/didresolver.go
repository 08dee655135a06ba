// Package didresolver resolves decentralized identifiers (did:key, did:web,
// did:jwk) to DID documents and the public keys they authorize.
//
// It is a plain Go library: it knows DID methods, DID documents, keys and
// HTTP fetching with limits, and nothing about Caddy or credentials.
//
// Keys are returned as crypto.PublicKey values of one of three concrete types:
// ed25519.PublicKey (Ed25519), *ecdsa.PublicKey on elliptic.P256() (P-256) and
// *secp256k1.PublicKey from github.com/decred/dcrd/dcrec/secp256k1/v4
// (secp256k1), so that ES256K works without jwx build tags.
package didresolver

import (
	"context"
	"crypto"
	"errors"

	"github.com/mcpi-edge/caddy-mcpi/internal/jsonkey"
)

// Resolver resolves a DID to its document. Implementations must be safe for
// concurrent use and must honour ctx cancellation.
type Resolver interface {
	Resolve(ctx context.Context, did string) (*Document, error)
}

// Refresher is implemented by resolvers that cache documents. Refresh
// re-fetches a DID's document bypassing the cache, subject to a rate limit;
// ResolveKey calls it once when a key id is not in the cached document, so a
// rotated did:web key is picked up without waiting for the TTL.
type Refresher interface {
	Refresh(ctx context.Context, did string) (*Document, error)
}

// Relationship names a verification relationship of a DID document.
type Relationship string

const (
	// Authentication is the relationship for keys that prove control of the
	// DID (signed challenges, presentations).
	Authentication Relationship = "authentication"
	// AssertionMethod is the relationship for keys that issue credentials.
	AssertionMethod Relationship = "assertionMethod"
)

// Key is a public key from a DID document, with the id of its verification
// method. Resolvers may hand one key value to several callers (New's
// resolver keeps the keys of did:key DIDs): treat Public as read-only.
type Key struct {
	// ID is the absolute verification method id, e.g. "did:key:z6Mk…#z6Mk…".
	ID string
	// Public is ed25519.PublicKey, *ecdsa.PublicKey (P-256) or
	// *secp256k1.PublicKey.
	Public crypto.PublicKey
}

// Errors. Every error returned by this package wraps exactly one of these, so
// callers can map them with errors.Is.
var (
	// ErrInvalidDID: the string is not a syntactically valid DID.
	ErrInvalidDID = errors.New("didresolver: invalid DID")
	// ErrUnsupportedMethod: the DID method is not supported by this resolver.
	ErrUnsupportedMethod = errors.New("didresolver: unsupported DID method")
	// ErrNotFound: the DID document does not exist (e.g. HTTP 404).
	ErrNotFound = errors.New("didresolver: DID document not found")
	// ErrFetch: the document could not be fetched (network, timeout, non-2xx).
	ErrFetch = errors.New("didresolver: fetching DID document failed")
	// ErrTooLarge: the document exceeds the size cap.
	ErrTooLarge = errors.New("didresolver: DID document too large")
	// ErrForbiddenAddress: the host resolves to an address the SSRF guard
	// refuses (loopback, private, link-local, …).
	ErrForbiddenAddress = errors.New("didresolver: address not allowed")
	// ErrInvalidDocument: the document is not valid JSON or not a DID document.
	ErrInvalidDocument = errors.New("didresolver: invalid DID document")
	// ErrIDMismatch: the document's id differs from the requested DID.
	ErrIDMismatch = errors.New("didresolver: DID document id does not match DID")
	// ErrKeyNotFound: no verification method with the requested id.
	ErrKeyNotFound = errors.New("didresolver: verification method not found")
	// ErrKeyNotAuthorized: the method exists but is not listed under the
	// requested verification relationship.
	ErrKeyNotAuthorized = errors.New("didresolver: verification method not authorized for relationship")
	// ErrUnsupportedKey: the key type or curve is not Ed25519, P-256 or secp256k1,
	// or its encoding is invalid.
	ErrUnsupportedKey = errors.New("didresolver: unsupported or invalid key")
)

// ErrRepeatedMember is wrapped, beside ErrInvalidDocument (or ErrInvalidDID
// for a did:jwk), by the error for a DID document or did:jwk key in which
// an object repeats a member name, at any depth, exactly or in another
// case under Unicode folding ("id" twice, "kty" and "\u212aty"). Decoding
// would keep one of the values, and another resolver of the same DID may
// keep the other: the keys a credential is checked with must not depend on
// the parser. It is the same value as vc.ErrRepeatedMember.
var ErrRepeatedMember = jsonkey.ErrRepeated
