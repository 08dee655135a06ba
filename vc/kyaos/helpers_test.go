package kyaos

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/didresolver"
)

// loadVectors reads testdata/kya-os-mcp/<name>.
func loadVectors(t testing.TB, name string, v any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "kya-os-mcp", name))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatal(err)
	}
}

// docResolver serves fixed DID documents, the way a did:web fetch would,
// and did:key through the real resolver.
type docResolver struct {
	docs map[string]*didresolver.Document
}

func (r docResolver) Resolve(ctx context.Context, did string) (*didresolver.Document, error) {
	if d, ok := r.docs[did]; ok {
		return d, nil
	}
	return didresolver.New().Resolve(ctx, did)
}

// jwkDocument builds a DID document whose methods are the JWKs (each with
// its kid as id), listed under rel.
func jwkDocument(t testing.TB, did string, rel string, jwks ...map[string]any) *didresolver.Document {
	t.Helper()
	var vms []map[string]any
	var ids []string
	for _, k := range jwks {
		pub := map[string]any{}
		for n, v := range k {
			if n != "kid" {
				pub[n] = v
			}
		}
		vms = append(vms, map[string]any{"id": k["kid"], "type": "JsonWebKey2020", "controller": did, "publicKeyJwk": pub})
		ids = append(ids, k["kid"].(string))
	}
	b, _ := json.Marshal(map[string]any{"id": did, "verificationMethod": vms, rel: ids})
	d, err := didresolver.ParseDocument(b)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// memNonces is a NonceStore for tests (the edge uses challenge's stores).
type memNonces struct {
	mu   sync.Mutex
	seen map[string]time.Duration
}

func (m *memNonces) UseNonce(_ context.Context, did, nonce string, ttl time.Duration) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.seen == nil {
		m.seen = map[string]time.Duration{}
	}
	k := did + "\x00" + nonce
	if _, ok := m.seen[k]; ok {
		return ErrNonceUsed
	}
	m.seen[k] = ttl
	return nil
}

func fixedClock(sec int64) func() time.Time { return func() time.Time { return time.Unix(sec, 0) } }
