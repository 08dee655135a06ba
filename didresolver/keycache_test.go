package didresolver

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"unsafe"
)

// TestDerivedKeysMatchDocuments: New's resolver answers did:key lookups
// from derived keys; every answer (key or error) must be the one the
// document path gives, for every key type and every kind of key id.
func TestDerivedKeysMatchDocuments(t *testing.T) {
	// slow resolves did:key through documents only: a resolverFunc is not
	// one of this package's resolvers, so ResolveKey takes the general path.
	slow := resolverFunc(func(_ context.Context, did string) (*Document, error) {
		d, err := ParseDID(did)
		if err != nil {
			return nil, err
		}
		return resolveKeyDID(d)
	})
	var dids []string
	for _, kt := range []KeyType{Ed25519, P256, Secp256k1} {
		did, _, err := KeyDID(mustGenerate(t, kt))
		if err != nil {
			t.Fatal(err)
		}
		dids = append(dids, did)
	}
	var kids []string
	for _, did := range dids {
		mb := did[len("did:key:"):]
		kids = append(kids, did, did+"#"+mb, did+"#other", did+"#"+mb[:len(mb)-1])
	}
	kids = append(kids,
		"did:key:z6Mk", "did:key:zzzz", "did:key:x6Mk", "did:key:z", "did:key:z0OIl",
		"did:key:z3u2en7t5LR2WtQH5PfsqMUsTfvFzjpJDBQjwDK8WeZn", // a multicodec of no supported key
	)
	for _, r := range []Resolver{New(), NewCache(New())} {
		for _, kid := range kids {
			for _, rel := range []Relationship{AssertionMethod, Authentication, "capabilityInvocation"} {
				t.Run(fmt.Sprintf("%T/%s/%s", r, kid, rel), func(t *testing.T) {
					ctx := context.Background()
					want, wantErr := ResolveKey(ctx, slow, kid, rel)
					for range 2 { // derived, then kept
						got, err := ResolveKey(ctx, r, kid, rel)
						if (err == nil) != (wantErr == nil) || err != nil && err.Error() != wantErr.Error() {
							t.Fatalf("error %v, want %v", err, wantErr)
						}
						checkOneSentinel(t, err)
						if got.ID != want.ID || !samePublicKey(want.Public, got.Public) && want.Public != nil {
							t.Fatalf("key %q %v, want %q %v", got.ID, got.Public, want.ID, want.Public)
						}
					}
				})
			}
		}
	}
}

// TestDerivedKeysKept: a did:key is derived once and its document and key
// are handed out again; the map stays bounded under distinct DIDs.
func TestDerivedKeysKept(t *testing.T) {
	ctx := context.Background()
	r := New().(*router)
	did, kid, err := KeyDID(mustGenerate(t, Ed25519))
	if err != nil {
		t.Fatal(err)
	}
	d1, err := r.Resolve(ctx, did)
	if err != nil {
		t.Fatal(err)
	}
	d2, err := r.Resolve(ctx, kid) // a DID URL names the same document
	if err != nil {
		t.Fatal(err)
	}
	if d1 != d2 {
		t.Fatal("did:key document derived twice")
	}
	if n := testing.AllocsPerRun(100, func() {
		if _, err := ResolveKey(ctx, r, kid, AssertionMethod); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("ResolveKey of a kept did:key allocates %v times", n)
	}

	for range maxDerivedKeys + 10 {
		did, _, err := KeyDID(mustGenerate(t, Ed25519))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.Resolve(ctx, did); err != nil {
			t.Fatal(err)
		}
	}
	r.keys.mu.RLock()
	size := len(r.keys.m)
	r.keys.mu.RUnlock()
	if size > maxDerivedKeys {
		t.Fatalf("%d derived keys kept, bound %d", size, maxDerivedKeys)
	}
}

// TestDerivedKeyOwnsStrings: a kept did:key entry holds no string that
// points into the DID it was asked for, which usually lies in a longer
// string (a credential's decoded header and claims) that the entry would
// otherwise keep alive.
func TestDerivedKeyOwnsStrings(t *testing.T) {
	did, _, err := KeyDID(mustGenerate(t, Ed25519))
	if err != nil {
		t.Fatal(err)
	}
	buf := strings.Repeat("x", 4096) + did + "#" + did[len("did:key:"):] + strings.Repeat("y", 4096)
	start := unsafe.StringData(buf)
	inBuf := func(s string) bool {
		if s == "" {
			return false
		}
		off := uintptr(unsafe.Pointer(unsafe.StringData(s))) - uintptr(unsafe.Pointer(start))
		return off < uintptr(len(buf))
	}
	d, err := ParseDID(buf[4096 : 4096+len(did)])
	if err != nil {
		t.Fatal(err)
	}
	var keys derivedKeys
	e, err := keys.get(d)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	walkStrings(reflect.ValueOf(e), func(path, s string) {
		n++
		if inBuf(s) {
			t.Errorf("%s = %q points into the DID's string", path, s)
		}
	})
	if n < 4 {
		t.Fatalf("only %d strings walked", n)
	}
	for id := range keys.m {
		if inBuf(id) {
			t.Errorf("map key %q points into the DID's string", id)
		}
	}
}

// walkStrings calls fn with every string reachable from v (through
// pointers, structs, slices, arrays, maps and interfaces), and its path.
func walkStrings(v reflect.Value, fn func(path, s string)) {
	seen := map[uintptr]bool{}
	var walk func(v reflect.Value, path string)
	walk = func(v reflect.Value, path string) {
		switch v.Kind() {
		case reflect.String:
			fn(path, v.String())
		case reflect.Pointer, reflect.Interface:
			if v.IsNil() {
				return
			}
			if v.Kind() == reflect.Pointer {
				if seen[v.Pointer()] {
					return
				}
				seen[v.Pointer()] = true
			}
			walk(v.Elem(), path)
		case reflect.Struct:
			for i := range v.NumField() {
				walk(v.Field(i), path+"."+v.Type().Field(i).Name)
			}
		case reflect.Slice, reflect.Array:
			for i := range v.Len() {
				walk(v.Index(i), fmt.Sprintf("%s[%d]", path, i))
			}
		case reflect.Map:
			for it := v.MapRange(); it.Next(); {
				walk(it.Key(), path+"{key}")
				walk(it.Value(), fmt.Sprintf("%s[%v]", path, it.Key()))
			}
		}
	}
	walk(v, "")
}
