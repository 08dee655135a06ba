package vc

import (
	"crypto/sha256"
	"reflect"
	"strings"
	"testing"
)

// TestCallKeyCoversChecks: the key is written for these rules; a new one
// must be added to AppendKey (or bypass the cache) and here.
func TestCallKeyCoversChecks(t *testing.T) {
	var names []string
	typ := reflect.TypeFor[checks]()
	for i := range typ.NumField() {
		names = append(names, typ.Field(i).Name)
	}
	got := strings.Join(names, " ")
	const want = "audiences requireAudience requiredScopes ancestors nonce requirePresentation"
	if got != want {
		t.Errorf("checks fields %q, AppendKey covers %q", got, want)
	}

	// Lists are length-prefixed: moving a value from one list to the
	// other, or splitting it, changes the key.
	f := newFixture(t)
	v := f.verifier()
	raw := []byte("x")
	keys := map[[sha256.Size]byte]string{}
	for name, c := range map[string]checks{
		"empty":          {},
		"aud ab":         {audiences: []string{"ab"}},
		"aud a b":        {audiences: []string{"a", "b"}},
		"scope ab":       {requiredScopes: []string{"ab"}},
		"aud a scope b":  {audiences: []string{"a"}, requiredScopes: []string{"b"}},
		"require aud":    {requireAudience: true},
		"ancestor x":     {ancestors: [][]byte{[]byte("x")}},
		"ancestor x, y":  {ancestors: [][]byte{[]byte("x"), []byte("y")}},
		"ancestor empty": {ancestors: [][]byte{{}}},
	} {
		k, ok := keyOf(v, raw, &c)
		if !ok {
			t.Fatalf("%s: bypassed", name)
		}
		if prev, dup := keys[k]; dup {
			t.Errorf("%s and %s share a key", name, prev)
		}
		keys[k] = name
	}
	// The credential and the rules are in one hash: moving bytes between
	// the last rule and the credential changes the key too, as does the
	// credential alone.
	for name, kc := range map[string]struct {
		raw string
		c   checks
	}{
		"scope a, credential bz":  {"bz", checks{requiredScopes: []string{"a"}}},
		"scope ab, credential z":  {"z", checks{requiredScopes: []string{"ab"}}},
		"no rules, credential y":  {"y", checks{}},
		"no rules, credential xx": {"xx", checks{}},
	} {
		k, ok := keyOf(v, []byte(kc.raw), &kc.c)
		if !ok {
			t.Fatalf("%s: bypassed", name)
		}
		if prev, dup := keys[k]; dup {
			t.Errorf("%s and %s share a key", name, prev)
		}
		keys[k] = name
	}
	for name, c := range map[string]checks{
		"nonce":                {nonce: func(string, string) error { return nil }},
		"require presentation": {requirePresentation: true},
		"too many ancestors":   {ancestors: make([][]byte, maxPooled+1)},
		"large ancestor":       {ancestors: [][]byte{make([]byte, defaultMaxSize+1)}},
	} {
		if _, ok := keyOf(v, raw, &c); ok {
			t.Errorf("%s: not bypassed", name)
		}
	}
}

// keyOf is the SHA-256 of the key input of the trimmed credential raw
// under c, and false when the call bypasses the cache.
func keyOf(v *Verifier, raw []byte, c *checks) ([sha256.Size]byte, bool) {
	in, ok := Call{v: v, raw: raw, c: c}.AppendKey(nil)
	if !ok {
		return [sha256.Size]byte{}, false
	}
	return sha256.Sum256(in), true
}
