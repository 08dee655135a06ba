package didresolver

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// vectorDir holds the kya-os conformance vectors, kept in the repository
// (one copy, also read by vc's tests) so the tests run on a fresh clone.
const vectorDir = "../testdata/kya-os-mcp"

type vectorFile struct {
	Vectors []struct {
		ID       string `json:"id"`
		Expected string `json:"expected"`
		Input    struct {
			DID         string          `json:"did"`
			DIDDocument json.RawMessage `json:"didDocument"`
		} `json:"input"`
	} `json:"vectors"`
}

func loadVectors(t testing.TB, name string) vectorFile {
	t.Helper()
	path := filepath.Join(vectorDir, name)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("kya-os vectors not found at %s (they are part of the repository): %v", path, err)
	}
	var vf vectorFile
	if err := json.Unmarshal(data, &vf); err != nil {
		t.Fatalf("parsing %s: %v", path, err)
	}
	if len(vf.Vectors) == 0 {
		t.Fatalf("%s holds no vectors", path)
	}
	return vf
}

func wantErr(t *testing.T, err, want error) {
	t.Helper()
	if want == nil {
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return
	}
	if !errors.Is(err, want) {
		t.Fatalf("error = %v, want %v", err, want)
	}
}

// sentinels lists every package error; each returned error must wrap
// exactly one of them.
var sentinels = []error{
	ErrInvalidDID, ErrUnsupportedMethod, ErrNotFound, ErrFetch, ErrTooLarge,
	ErrForbiddenAddress, ErrInvalidDocument, ErrIDMismatch, ErrKeyNotFound,
	ErrKeyNotAuthorized, ErrUnsupportedKey,
}

func checkOneSentinel(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		return
	}
	n := 0
	for _, s := range sentinels {
		if errors.Is(err, s) {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("error %q wraps %d package sentinels, want exactly 1", err, n)
	}
}

func mustGenerate(t testing.TB, kt KeyType) any {
	t.Helper()
	priv, err := GenerateKey(kt)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := PublicKeyOf(priv)
	if err != nil {
		t.Fatal(err)
	}
	return pub
}

func errorsIs(err, target error) bool { return errors.Is(err, target) }
