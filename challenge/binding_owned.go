package challenge

import (
	"context"
	"errors"
	"time"
)

// OwnedBinder keeps bindings that an authenticated caller made, each
// counted against that caller. A caller holds at most max live bindings of
// one kind; one more drops that caller's oldest. A caller that floods the
// store then loses only its own bindings, never another caller's, and
// never another kind's.
//
// kind names the partition ("kyaos-decl", say): a short constant of the
// caller's code, never input. owner identifies the caller (the user who
// delegated, say); the store keeps only a hash of it. key is looked
// up with SessionBinder.Lookup, as any binding.
type OwnedBinder interface {
	SessionBinder
	BindOwned(ctx context.Context, kind, owner, key string, value []byte, ttl time.Duration, max int) error
	// Take returns the value bound under key and removes the binding, in
	// one step: of concurrent Takes of one key, across every process
	// sharing the store, at most one gets it. It fails with
	// ErrBindingNotFound when there is none.
	Take(ctx context.Context, key string) ([]byte, error)
}

// errOwnedArgs refuses a BindOwned call that could not be bounded.
var errOwnedArgs = errors.New("challenge: owned binding needs a kind, an owner, a positive ttl and a positive max")

func checkOwnedArgs(kind, owner string, ttl time.Duration, max int) error {
	if kind == "" || owner == "" || ttl <= 0 || max <= 0 {
		return errOwnedArgs
	}
	return nil
}
