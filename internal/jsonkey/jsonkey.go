// Package jsonkey compares JSON object member names the way lenient
// decoders match them.
//
// Go's encoding/json matches a member to a struct field by exact name, else
// by Unicode simple case folding (strings.EqualFold: "paramſ" with U+017F
// is "params", "\u212aey" with the Kelvin sign is "key"), and the last
// matching member wins. Older Go releases folded each rune as
// unicode.ToUpper(unicode.ToLower(r)), which also merges "İ" (U+0130) with
// "I". Other parsers match exactly and keep the first or the last of a
// repeated name. A message whose member names fold together is therefore
// read differently by different parsers: whoever checks it and whoever acts
// on it may see different values. Check refuses such objects.
package jsonkey

import (
	"errors"
	"strings"
	"unicode"
	"unicode/utf8"
)

var (
	// ErrRepeated: two member names of one object fold to the same key
	// (an exact repeat included).
	ErrRepeated = errors.New("member name repeated (in some letter case)")
	// ErrVariant: a member name folds to a known name without being it.
	ErrVariant = errors.New("member name is a case variant of a known member")
)

// Fold returns the fold key of a member name: names that any of the
// foldings above could match to one field have the same key. Invalid UTF-8
// counts as U+FFFD, as decoders read it.
func Fold(name string) string {
	ascii := true
	for i := 0; i < len(name); i++ {
		if name[i] >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	if ascii {
		return strings.ToLower(name)
	}
	var b strings.Builder
	b.Grow(len(name))
	for _, r := range name { // invalid bytes range as utf8.RuneError
		b.WriteRune(foldRune(r))
	}
	return b.String()
}

// foldRune maps r to the smallest rune of the simple fold orbit of
// ToUpper(ToLower(r)): runes that EqualFold or the older encoding/json
// fold would match map to one rune. For ASCII letters that is the upper
// case letter; Fold lowers ASCII instead, consistently (see asciiFold).
func foldRune(r rune) rune {
	r = unicode.ToUpper(unicode.ToLower(r))
	least := r
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		least = min(least, f)
	}
	if 'A' <= least && least <= 'Z' {
		least += 'a' - 'A' // as the ASCII fast path
	}
	return least
}

// Check reports whether the member names of one object (in any order) can
// be read by exact name without ambiguity: it fails with ErrRepeated when
// two names fold to the same key, and with ErrVariant when a name folds to
// one of known without being exactly it (a lone "Credential" where
// "credential" is read: the reader would miss it, encoding/json would not).
func Check(names []string, known ...string) error {
	if len(names) < 2 && len(known) == 0 {
		return nil
	}
	seen := make(map[string]struct{}, len(names))
	for _, n := range names {
		k := Fold(n)
		if _, dup := seen[k]; dup {
			return ErrRepeated
		}
		seen[k] = struct{}{}
	}
	for _, n := range names {
		for _, kn := range known {
			if n != kn && Fold(n) == Fold(kn) {
				return ErrVariant
			}
		}
	}
	return nil
}
