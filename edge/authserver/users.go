package authserver

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"strings"
	"sync"

	"github.com/mcpi-edge/caddy-mcpi/didresolver"
)

// Users' DIDs. Each signed-in user gets one Ed25519 key, made at the first
// consent and kept in the key storage so that every replica signs with and
// publishes the same key. The user's DID is did:web under the edge's own
// host at an opaque id, a keyed hash of the login subject: the DID never
// shows an e-mail address or a user name, and nobody without the server's
// secret can tell which login a DID belongs to.

const (
	usersKeyPrefix = "mcpi/authserver/users/"
	// didUsersPath is the did:web path of a user's DID (":" separated).
	didUsersPath = ":oauth:users:"
	// maxCachedUserKeys bounds the keys kept in memory.
	maxCachedUserKeys = 10000
	userKeyFragment   = "#key-1"
)

var errUnknownUser = errors.New("authserver: no such user DID on this edge")

type userKeys struct {
	st  KeyStorage
	sec *secrets

	mu    sync.RWMutex
	cache map[string]ed25519.PrivateKey
}

func newUserKeys(st KeyStorage, sec *secrets) *userKeys {
	if st == nil {
		st = newMemKeys()
	}
	return &userKeys{st: st, sec: sec, cache: make(map[string]ed25519.PrivateKey)}
}

// opaqueID is the user's id in DIDs: 128 bits of a keyed hash of subject.
func (u *userKeys) opaqueID(subject string) string {
	return base64.RawURLEncoding.EncodeToString(mac(u.sec.user, subject)[:16])
}

// userDID is the DID of the user with opaque id on the host of origin.
func userDID(origin, id string) string {
	host := origin[strings.Index(origin, "://")+3:]
	return "did:web:" + strings.ReplaceAll(strings.ToLower(host), ":", "%3A") + didUsersPath + id
}

// parseUserDID returns the opaque id of a DID of the form userDID makes,
// on any host.
func parseUserDID(did string) (string, bool) {
	rest, ok := strings.CutPrefix(did, "did:web:")
	if !ok {
		return "", false
	}
	i := strings.Index(rest, didUsersPath)
	if i <= 0 {
		return "", false
	}
	id := rest[i+len(didUsersPath):]
	if !validOpaqueID(id) {
		return "", false
	}
	return id, true
}

func validOpaqueID(id string) bool {
	if len(id) != 22 {
		return false
	}
	_, err := base64.RawURLEncoding.DecodeString(id)
	return err == nil
}

// key returns the key of the user with opaque id, making it when create.
func (u *userKeys) key(ctx context.Context, id string, create bool) (ed25519.PrivateKey, error) {
	u.mu.RLock()
	k, ok := u.cache[id]
	u.mu.RUnlock()
	if ok {
		return k, nil
	}
	name := usersKeyPrefix + id + ".jwk"
	var raw []byte
	var err error
	if create {
		raw, err = loadOrMake(ctx, u.st, name, func() ([]byte, error) {
			_, priv, err := ed25519.GenerateKey(nil)
			if err != nil {
				return nil, err
			}
			return didresolver.MarshalPrivateJWK(priv, "")
		})
	} else {
		raw, err = u.st.Load(ctx, name)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, errUnknownUser
		}
	}
	if err != nil {
		return nil, fmt.Errorf("authserver: user key storage: %w", err)
	}
	priv, _, err := didresolver.ParsePrivateJWK(raw)
	if err != nil {
		return nil, fmt.Errorf("authserver: stored user key %s: %w", name, err)
	}
	ek, ok := priv.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("authserver: stored user key %s is not Ed25519", name)
	}
	u.mu.Lock()
	if len(u.cache) >= maxCachedUserKeys {
		u.cache = make(map[string]ed25519.PrivateKey)
	}
	u.cache[id] = ek
	u.mu.Unlock()
	return ek, nil
}

// userDocument is the DID document of did, whose key is pub.
func userDocument(did string, pub ed25519.PublicKey) ([]byte, error) {
	jwk, err := didresolver.PublicJWK(pub)
	if err != nil {
		return nil, err
	}
	kid := did + userKeyFragment
	return json.Marshal(map[string]any{
		"@context": []string{"https://www.w3.org/ns/did/v1", "https://w3id.org/security/suites/jws-2020/v1"},
		"id":       did,
		"verificationMethod": []map[string]any{{
			"id": kid, "type": "JsonWebKey2020", "controller": did, "publicKeyJwk": jwk,
		}},
		"authentication":  []string{kid},
		"assertionMethod": []string{kid},
	})
}

// serveUserDocument answers GET /oauth/users/<id>/did.json: anyone may
// verify a credential the edge issued for a user.
func (s *Server) serveUserDocument(w http.ResponseWriter, r *http.Request, id string) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		methodNotAllowed(w, "GET, HEAD")
		return
	}
	if !validOpaqueID(id) {
		oauthError(w, http.StatusNotFound, "not_found", "no such user DID")
		return
	}
	k, err := s.users.key(r.Context(), id, false)
	if errors.Is(err, errUnknownUser) {
		oauthError(w, http.StatusNotFound, "not_found", "no such user DID")
		return
	}
	if err != nil {
		s.deps.Logger.Error("user DID document", zapErr(err))
		oauthError(w, http.StatusServiceUnavailable, "temporarily_unavailable", "the key storage could not be read; retry")
		return
	}
	body, _ := userDocument(userDID(s.issuer(r), id), k.Public().(ed25519.PublicKey))
	w.Header().Set("Content-Type", "application/did+json")
	w.Header().Add("Vary", "Host")
	w.Header().Set("Cache-Control", "public, max-age=300")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}

// Resolve resolves a user DID this server hosts, from its key storage: the
// edge never fetches its own users' DIDs over HTTP. It fails with
// didresolver.ErrNotFound for a DID of that form without a key here.
func (s *Server) Resolve(ctx context.Context, did string) (*didresolver.Document, error) {
	id, ok := parseUserDID(did)
	if !ok {
		return nil, fmt.Errorf("%w: not a user DID of this edge", didresolver.ErrNotFound)
	}
	k, err := s.users.key(ctx, id, false)
	if errors.Is(err, errUnknownUser) {
		return nil, fmt.Errorf("%w: %v", didresolver.ErrNotFound, err)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", didresolver.ErrFetch, err)
	}
	body, err := userDocument(did, k.Public().(ed25519.PublicKey))
	if err != nil {
		return nil, err
	}
	return didresolver.ParseDocument(body)
}

// IsUserDID reports whether did has the form of a user DID this kind of
// server hosts (did:web:<host>:oauth:users:<id>). Such DIDs are resolved
// by Resolve only, from the edge's own keys.
func IsUserDID(did string) bool {
	_, ok := parseUserDID(did)
	return ok
}

// memKeys is the key storage of a server without one: per process.
type memKeys struct {
	mu sync.Mutex
	m  map[string][]byte
}

func newMemKeys() *memKeys { return &memKeys{m: make(map[string][]byte)} }

func (m *memKeys) Load(_ context.Context, key string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if b, ok := m.m[key]; ok {
		return b, nil
	}
	return nil, fs.ErrNotExist
}

func (m *memKeys) Store(_ context.Context, key string, v []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.m[key] = v
	return nil
}

func (m *memKeys) Lock(context.Context, string) error   { return nil }
func (m *memKeys) Unlock(context.Context, string) error { return nil }
