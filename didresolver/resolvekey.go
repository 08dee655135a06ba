package didresolver

import (
	"context"
	"errors"
	"fmt"
)

// ResolveKey resolves the DID of kid ("did:…#frag") and returns that key,
// which must be authorized for rel. If kid has no fragment, the document
// must authorize exactly one key for rel. When the key id is unknown and r is
// a Refresher, the document is refreshed once and the lookup retried.
func ResolveKey(ctx context.Context, r Resolver, kid string, rel Relationship) (Key, error) {
	d, err := ParseDID(kid)
	if err != nil {
		return Key{}, err
	}
	if k, ok, err := quickKey(ctx, r, d, rel); ok {
		return k, err
	}
	did := d.String()
	doc, err := r.Resolve(ctx, did)
	if err != nil {
		return Key{}, err
	}
	if err := checkDocID(doc, did); err != nil {
		return Key{}, err
	}
	if d.Fragment == "" {
		return onlyKey(doc, rel)
	}
	k, err := doc.Key(kid, rel)
	if !errors.Is(err, ErrKeyNotFound) {
		return k, err
	}
	// Only an unknown id triggers a refresh: a known key that is not
	// authorized will not become authorized by refetching sooner than the
	// TTL, and refreshing on it would let anyone force fetches.
	rf, ok := r.(Refresher)
	if !ok {
		return Key{}, err
	}
	doc, err = rf.Refresh(ctx, did)
	if err != nil {
		return Key{}, err
	}
	if err := checkDocID(doc, did); err != nil {
		return Key{}, err
	}
	return doc.Key(kid, rel)
}

// checkDocID guards against resolvers (custom ones included) that return a
// document for another DID.
func checkDocID(doc *Document, did string) error {
	if doc == nil {
		return fmt.Errorf("%w: resolver returned no document", ErrInvalidDocument)
	}
	if doc.ID != did {
		return fmt.Errorf("%w: document id differs from the DID", ErrIDMismatch)
	}
	return nil
}

// onlyKey serves a kid without fragment. Counting every method listed under
// rel, usable or not, keeps the choice unambiguous: a second key of an
// unsupported type still means the signer's key is not determined.
func onlyKey(doc *Document, rel Relationship) (Key, error) {
	ids := doc.listed(rel)
	if len(ids) != 1 {
		return Key{}, fmt.Errorf("%w: key id has no fragment and the DID authorizes %d keys for %s", ErrKeyNotFound, len(ids), string(rel))
	}
	return doc.Key(ids[0], rel)
}
