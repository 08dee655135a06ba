package didresolver

import (
	"context"
	"strings"
	"sync"
)

// did:key documents are derived, not fetched, but deriving one costs more
// than the signature it is needed for is worth hiding: base58 decoding
// and its canonical re-encoding, the document, and decoding the key again
// from the document, about 30 allocations. An edge sees the same few
// issuers on every request, so New's resolver keeps what it derived in a
// small bounded map. A did:key is self-certifying (the document is a pure
// function of the DID), so a kept entry can never be stale, and the map
// is separate from Cache's did:web entries, so throwaway did:keys cannot
// evict those.
//
// maxDerivedKeys bounds the map; when it is full an arbitrary entry makes
// room (Go's map iteration starts at a random place). A flood of distinct
// did:keys therefore costs at most a re-derivation of the ones in use.
const maxDerivedKeys = 1024

// derivedKey is a did:key's document and its one key, as Document.Key
// returns it.
type derivedKey struct {
	doc *Document
	key Key
}

// derivedKeys maps a did:key's method-specific id to what it derives to.
type derivedKeys struct {
	mu sync.RWMutex
	m  map[string]*derivedKey
}

// get returns the entry of the did:key d, deriving and keeping it on a
// miss. Errors are what resolveKeyDID returns; they are not kept (a
// malformed DID fails before any costly step but base58 decoding, which
// maxKeyIDLength bounds).
func (c *derivedKeys) get(d DID) (*derivedKey, error) {
	c.mu.RLock()
	e := c.m[d.ID]
	c.mu.RUnlock()
	if e != nil {
		return e, nil
	}
	doc, err := resolveKeyDID(d)
	if err != nil {
		return nil, err
	}
	e = &derivedKey{doc: doc}
	// keyDocument lists its one method under both relationships; the key
	// is decoded here once, exactly as Document.Key would decode it.
	if e.key, err = doc.Key(doc.VerificationMethod[0].ID, AssertionMethod); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[string]*derivedKey)
	}
	if len(c.m) >= maxDerivedKeys {
		for id := range c.m {
			delete(c.m, id)
			break
		}
	}
	// The id is usually part of a longer string (a credential's header):
	// keep only the id.
	c.m[strings.Clone(d.ID)] = e
	return e, nil
}

// didKeyResolver is implemented by this package's resolvers, which can
// answer a did:key lookup from derivedKeys without building anything.
type didKeyResolver interface {
	didKey(d DID) (*derivedKey, bool, error)
}

// Observer is implemented by a Resolver that wraps another only to watch
// its resolutions (a trace span, a metric). Observed returns the resolver
// it wraps when there is nothing to watch in ctx (no span is recorded,
// say), so that ResolveKey may answer a did:key from that resolver's
// derived keys without building a document; nil otherwise.
type Observer interface {
	Observed(ctx context.Context) Resolver
}

// quickKey serves ResolveKey for a did:key from r's derived keys when r is
// this package's resolver (or an Observer of one with nothing to
// watch) and the request is the common one: the DID's
// own key (no fragment, or the fragment its key id names) for
// authentication or assertionMethod. It returns ok false for everything
// else, which then takes the general path with the same outcome.
func quickKey(ctx context.Context, r Resolver, d DID, rel Relationship) (Key, bool, error) {
	if d.Method != "key" || rel != AssertionMethod && rel != Authentication {
		return Key{}, false, nil
	}
	if w, ok := r.(Observer); ok {
		if inner := w.Observed(ctx); inner != nil {
			r = inner
		}
	}
	kr, ok := r.(didKeyResolver)
	if !ok {
		return Key{}, false, nil
	}
	e, ok, err := kr.didKey(d)
	switch {
	case !ok:
		return Key{}, false, nil
	case err != nil:
		return Key{}, true, err
	case d.Fragment != "" && d.Fragment != d.ID:
		// Another key id: Document.Key reports it not found.
		return Key{}, false, nil
	}
	return e.key, true, nil
}
