package authserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/didresolver"
)

// The delegations a user gave: one record per refresh family, written when
// the family is made (the first token exchange after a consent), in the key
// storage under the user's opaque id, so that every replica and the
// operator's command line see the same list. The record says what the
// user's page shows; whether the family is revoked stays in the shared
// store, which every replica checks within seconds. Revoking binds the
// revocation there first, then deletes the record.

const (
	grantsPrefix = "mcpi/authserver/grants/"
	// MaxDelegationsPerUser bounds one user's live delegations: a client
	// looping through consents fills only its user's list, and the page
	// stays readable. One more is refused until the user revokes one.
	MaxDelegationsPerUser = 100
)

// Delegation is one delegation a user gave, as the user's page and the
// operator's command line show it. It never holds a token.
type Delegation struct {
	// Family is the refresh family: the delegation id of every credential
	// renewed from the consent, and what revoking names.
	Family     string    `json:"family"`
	UserID     string    `json:"user_id"` // the opaque id, never the login
	UserDID    string    `json:"user_did"`
	ClientName string    `json:"client_name,omitempty"`
	AgentDID   string    `json:"agent_did"`
	Scopes     []string  `json:"scopes"`
	Resource   string    `json:"resource"`
	Created    time.Time `json:"created"`
	Expires    time.Time `json:"expires"`
	// LastUse is when a credential of the family was last accepted, to
	// the minute; zero when unknown. Not stored in the record.
	LastUse time.Time `json:"last_use,omitzero"`
}

// ListingStorage is key storage that can also list and delete keys, as
// Caddy's storage can. The user's page and the command line need it.
type ListingStorage interface {
	KeyStorage
	List(ctx context.Context, prefix string, recursive bool) ([]string, error)
	Delete(ctx context.Context, key string) error
}

func grantKey(userID, family string) string { return grantsPrefix + userID + "/" + family }

func validFamily(f string) bool {
	return len(f) == 22 && strings.Trim(f, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") == ""
}

// ListDelegations returns the live delegations of the user with opaque id
// userID (every user's when userID is empty), oldest first. Records that
// cannot be read are skipped and reported in the error, beside the others.
func ListDelegations(ctx context.Context, st ListingStorage, userID string, now time.Time) ([]Delegation, error) {
	prefix := strings.TrimSuffix(grantsPrefix, "/")
	if userID != "" {
		if !validOpaqueID(userID) {
			return nil, fmt.Errorf("authserver: %q is not a user id of this edge (22 base64url characters, the last part of the user DID)", userID)
		}
		prefix = grantsPrefix + userID
	}
	keys, err := st.List(ctx, prefix, true)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("authserver: listing delegations: %w", err)
	}
	var out []Delegation
	var bad []string
	for _, k := range keys {
		uid, fam, ok := strings.Cut(strings.TrimPrefix(k, grantsPrefix), "/")
		if !ok || !validOpaqueID(uid) || !validFamily(fam) {
			continue // a user's directory (Caddy's file storage lists them)
		}
		raw, err := st.Load(ctx, k)
		if errors.Is(err, fs.ErrNotExist) {
			continue // revoked meanwhile
		}
		var d Delegation
		if err != nil || readStrict(raw, &d, "family", "user_id", "user_did", "client_name", "agent_did", "scopes", "resource", "created", "expires", "last_use") != nil || !validFamily(d.Family) || grantKey(d.UserID, d.Family) != k {
			bad = append(bad, k)
			continue
		}
		if now.After(d.Expires) {
			continue
		}
		out = append(out, d)
	}
	slices.SortFunc(out, func(a, b Delegation) int { return a.Created.Compare(b.Created) })
	if len(bad) > 0 {
		return out, fmt.Errorf("authserver: unreadable delegation records (delete them): %s", strings.Join(bad, ", "))
	}
	return out, nil
}

// RevokeDelegation revokes the family of the user with opaque id userID on
// every replica sharing store, then deletes its record. A family without
// a record is still revoked (until ttl), so that a revocation never
// depends on the list being right.
func RevokeDelegation(ctx context.Context, st ListingStorage, store Store, userID, family string, ttl time.Duration) error {
	if !validFamily(family) {
		return fmt.Errorf("authserver: %q is not a delegation id (22 base64url characters)", family)
	}
	if err := store.Bind(ctx, revokedPrefix+family, []byte{1}, ttl); err != nil {
		return fmt.Errorf("authserver: recording the revocation in the shared store: %w", err)
	}
	if userID == "" {
		return nil
	}
	if err := st.Delete(ctx, grantKey(userID, family)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("authserver: revoked, but its record stays listed: %w", err)
	}
	return nil
}

// FindDelegation returns the live delegation with family, of any user.
func FindDelegation(ctx context.Context, st ListingStorage, family string, now time.Time) (Delegation, error) {
	all, err := ListDelegations(ctx, st, "", now)
	for _, d := range all {
		if d.Family == family {
			return d, nil
		}
	}
	if err != nil {
		return Delegation{}, err
	}
	return Delegation{}, fmt.Errorf("authserver: no live delegation %s (list them with `caddy mcpi delegations list`)", family)
}

// grantRecords writes the records, bounded per user.
type grantRecords struct {
	mu sync.Mutex // with memory key storage, whose Lock does nothing
}

var errTooManyDelegations = fmt.Errorf("the user already has %d live delegations: they must revoke one on /oauth/delegations first", MaxDelegationsPerUser)

// record stores d unless its user already holds MaxDelegationsPerUser.
func (s *Server) recordDelegation(ctx context.Context, d Delegation) error {
	st, ok := s.users.st.(ListingStorage)
	if !ok {
		// Storage that cannot list could not show the record either; the
		// delegation is still revocable at /oauth/revoke.
		return nil
	}
	lock := "mcpi-authserver-grants-" + d.UserID
	s.grants.mu.Lock()
	defer s.grants.mu.Unlock()
	if err := st.Lock(ctx, lock); err != nil {
		return err
	}
	defer func() { _ = st.Unlock(context.WithoutCancel(ctx), lock) }()
	live, err := ListDelegations(ctx, st, d.UserID, time.Now())
	if err != nil && len(live) == 0 {
		return err
	}
	if len(live) >= MaxDelegationsPerUser {
		return errTooManyDelegations
	}
	s.pruneExpired(ctx, st, d.UserID)
	b, _ := json.Marshal(d)
	return st.Store(ctx, grantKey(d.UserID, d.Family), b)
}

// pruneExpired deletes the user's records whose family has expired.
func (s *Server) pruneExpired(ctx context.Context, st ListingStorage, userID string) {
	keys, err := st.List(ctx, grantsPrefix+userID, false)
	if err != nil {
		return
	}
	now := time.Now()
	for _, k := range keys {
		raw, err := st.Load(ctx, k)
		if err != nil {
			continue
		}
		var d Delegation
		if json.Unmarshal(raw, &d) == nil && now.After(d.Expires) {
			_ = st.Delete(ctx, k)
		}
	}
}

// startDelegation records the family g starts, at its first token
// exchange. It has answered the client when it returns false.
func (s *Server) startDelegation(w http.ResponseWriter, r *http.Request, g grant, proof *DPoPProof) bool {
	agent := s.clientAgentDID(g.ClientID)
	if g.JKT != "" && proof != nil {
		if did, err := didresolver.JWKDID(proof.Key); err == nil {
			agent = did
		}
	}
	name := ""
	if cl, err := s.lookupClient(r.Context(), g.ClientID); err == nil {
		name = cl.Name
	}
	d := Delegation{
		Family: g.Family, UserID: g.UserID, UserDID: userDID(g.Origin, g.UserID), ClientName: name,
		AgentDID: agent, Scopes: slices.Clone(g.Scopes), Resource: g.Resource,
		Created: time.Now().UTC().Truncate(time.Second), Expires: time.Unix(g.FamilyExpires, 0).UTC(),
	}
	if d.Scopes == nil {
		d.Scopes = []string{}
	}
	err := s.recordDelegation(r.Context(), d)
	switch {
	case errors.Is(err, errTooManyDelegations):
		oauthError(w, http.StatusBadRequest, "invalid_grant", err.Error())
		return false
	case err != nil:
		// Unlisted, the user could not revoke it from their page.
		s.deps.Logger.Error("delegation record", zapErr(err))
		oauthError(w, http.StatusServiceUnavailable, "temporarily_unavailable", "the delegation could not be recorded and the code is spent: start the authorization again")
		return false
	}
	return true
}

// DropRevoked removes from ds the delegations revoked in store (by the
// client at /oauth/revoke, or a reused refresh token), deleting their
// records from st; a store failure keeps them listed.
func DropRevoked(ctx context.Context, st ListingStorage, store Store, ds []Delegation) []Delegation {
	out := ds[:0]
	for _, d := range ds {
		_, err := store.Lookup(ctx, revokedPrefix+d.Family)
		if err == nil {
			_ = st.Delete(ctx, grantKey(d.UserID, d.Family))
			continue
		}
		out = append(out, d)
	}
	return out
}
