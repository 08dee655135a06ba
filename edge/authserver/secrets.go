package authserver

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
)

// secretKey is where the server's secret lives in the key storage: every
// replica reads the same one, so a client id, a consent form or a refresh
// token made by one replica is good on every other.
const secretKey = "mcpi/authserver/secret"

// secrets are keys derived from the one shared secret, one per purpose, so
// that a value MACed for one purpose is never accepted for another.
type secrets struct {
	client  []byte // client ids (stateless registrations)
	csrf    []byte // consent forms
	user    []byte // users' opaque ids
	agent   []byte // per-client agent DIDs
	refresh []byte // refresh tokens
}

// loadSecrets reads the shared secret, making it under the storage's lock
// when no replica has yet. Without storage it is random, per process.
func loadSecrets(ctx context.Context, st KeyStorage) (*secrets, error) {
	master, err := loadOrMake(ctx, st, secretKey, func() ([]byte, error) {
		b := make([]byte, 32)
		_, err := rand.Read(b)
		return []byte(base64.RawURLEncoding.EncodeToString(b)), err
	})
	if err != nil {
		return nil, err
	}
	raw, err := base64.RawURLEncoding.DecodeString(string(master))
	if err != nil || len(raw) < 32 {
		return nil, fmt.Errorf("stored secret %s is not 32 base64url bytes: delete it to make a new one (every client registration and refresh token becomes invalid)", secretKey)
	}
	derive := func(label string) []byte {
		m := hmac.New(sha256.New, raw)
		m.Write([]byte("mcpi authserver " + label))
		return m.Sum(nil)
	}
	return &secrets{
		client: derive("client"), csrf: derive("csrf"), user: derive("user"),
		agent: derive("agent"), refresh: derive("refresh"),
	}, nil
}

// loadOrMake loads key from st, or makes it with make and stores it, under
// a lock so that two replicas starting at once agree on one value.
func loadOrMake(ctx context.Context, st KeyStorage, key string, make func() ([]byte, error)) ([]byte, error) {
	if st == nil {
		return make()
	}
	if b, err := st.Load(ctx, key); err == nil {
		return b, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	lock := lockName(key)
	if err := st.Lock(ctx, lock); err != nil {
		return nil, err
	}
	defer func() { _ = st.Unlock(context.WithoutCancel(ctx), lock) }()
	if b, err := st.Load(ctx, key); err == nil {
		return b, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	b, err := make()
	if err != nil {
		return nil, err
	}
	if err := st.Store(ctx, key, b); err != nil {
		return nil, err
	}
	return b, nil
}

// lockName keeps only the characters every storage accepts in a lock name.
func lockName(key string) string {
	safe := []byte(key)
	for i, c := range safe {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			safe[i] = '_'
		}
	}
	return string(safe)
}

// mac is HMAC-SHA256 of parts under key, each part length-prefixed so
// that no two lists of parts MAC alike.
func mac(key []byte, parts ...string) []byte {
	m := hmac.New(sha256.New, key)
	for _, p := range parts {
		var n [4]byte
		n[0], n[1], n[2], n[3] = byte(len(p)>>24), byte(len(p)>>16), byte(len(p)>>8), byte(len(p))
		m.Write(n[:])
		m.Write([]byte(p))
	}
	return m.Sum(nil)
}

// randomToken is 32 random bytes, base64url.
func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand does not fail on supported systems
	return base64.RawURLEncoding.EncodeToString(b)
}

// digest is the store key of a secret value: its SHA-256, so that the
// store never holds the value itself.
func digest(prefix, v string) string {
	sum := sha256.Sum256([]byte(v))
	return prefix + base64.RawURLEncoding.EncodeToString(sum[:])
}

func encodeMAC(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// macEqual compares an encoded MAC with want in constant time.
func macEqual(enc string, want []byte) bool {
	got, err := base64.RawURLEncoding.DecodeString(enc)
	return err == nil && hmac.Equal(got, want)
}
