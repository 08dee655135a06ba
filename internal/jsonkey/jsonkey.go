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
	if isASCII(name) {
		return strings.ToLower(name)
	}
	var b strings.Builder
	b.Grow(len(name))
	for _, r := range name { // invalid bytes range as utf8.RuneError
		b.WriteRune(foldRune(r))
	}
	return b.String()
}

// FoldsTo reports whether name and key have the same fold key
// (Fold(name) == Fold(key)), without allocating when both are ASCII, the
// common case of a member name compared with a known one.
func FoldsTo(name []byte, key string) bool {
	if !isASCII(name) || !isASCII(key) {
		return Fold(string(name)) == Fold(key)
	}
	if len(name) != len(key) {
		return false
	}
	for i := range len(name) {
		if asciiLower(name[i]) != asciiLower(key[i]) {
			return false
		}
	}
	return true
}

func isASCII[T string | []byte](s T) bool {
	for i := range len(s) {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

func asciiLower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
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

// Members finds a repeated member name anywhere in one JSON document while
// a one-pass reader reads it: the reader calls Open where an object with
// members starts, Add with each member's name (unescaped, as decoders read
// it), and Close where that object ends. Add fails with ErrRepeated when
// the name folds to the key of an earlier name of the same object (an exact
// repeat included). Checking every level matters: a repeated member inside
// a credential's subject or proof is read by one parser as the first value
// and by another as the last, just like one at the top.
//
// The zero value is ready for use. The first names and levels are held in
// the value itself, so that a reader keeping a Members in a local variable
// checks a small document without allocating. Add keeps its argument: the
// caller must not change the bytes behind it before it is done.
type Members struct {
	// names of the open objects, outermost object first: an ASCII name as
	// given, any other as its Fold key. Two names fold together exactly
	// when they are equal after lowering ASCII letters (see sameKey).
	n     int
	names [inlineNames]string
	more  []string // names past inlineNames
	// starts holds the index in names of each open object's first name.
	depth  int
	starts [inlineDepth]int
	deeper []int // starts past inlineDepth
	// sets holds the keys of the open objects that have more than
	// linearMax names, innermost last: comparing each new name with all
	// the earlier ones would cost quadratic time in a hostile object.
	sets []memberSet
}

type memberSet struct {
	start int
	keys  map[string]struct{}
}

const (
	inlineNames = 32
	inlineDepth = 16
	linearMax   = 16
)

// Open starts an object.
func (m *Members) Open() {
	if m.depth < inlineDepth {
		m.starts[m.depth] = m.n
	} else {
		m.deeper = append(m.deeper[:m.depth-inlineDepth], m.n)
	}
	m.depth++
}

// Close ends the innermost open object.
func (m *Members) Close() {
	start := m.start()
	m.depth--
	if k := len(m.sets); k > 0 && m.sets[k-1].start == start {
		m.sets = m.sets[:k-1]
	}
	m.n = start
	if start >= inlineNames {
		m.more = m.more[:start-inlineNames]
	} else {
		m.more = m.more[:0]
	}
}

// start returns where the innermost open object's names begin. Each open
// object starts after its parent's: the parent already holds the name of
// the member whose value the object is, so no two open objects share a
// start, and sets can be matched to objects by it.
func (m *Members) start() int {
	d := m.depth - 1
	if d < inlineDepth {
		return m.starts[d]
	}
	return m.deeper[d-inlineDepth]
}

// Add records the name of a member of the innermost open object, failing
// with ErrRepeated if an earlier member of that object folds to the same
// key.
func (m *Members) Add(name string) error {
	for i := 0; i < len(name); i++ {
		if name[i] >= utf8.RuneSelf {
			name = Fold(name) // allocates, for the rare name outside ASCII
			break
		}
	}
	start := m.start()
	if k := len(m.sets); k > 0 && m.sets[k-1].start == start {
		key := lowerASCII(name)
		if _, dup := m.sets[k-1].keys[key]; dup {
			return ErrRepeated
		}
		m.sets[k-1].keys[key] = struct{}{}
		return nil
	}
	for i := start; i < m.n; i++ {
		if sameKey(name, m.at(i)) {
			return ErrRepeated
		}
	}
	if m.n < inlineNames {
		m.names[m.n] = name
	} else {
		m.more = append(m.more, name)
	}
	m.n++
	if m.n-start > linearMax {
		keys := make(map[string]struct{}, 2*linearMax)
		for i := start; i < m.n; i++ {
			keys[lowerASCII(m.at(i))] = struct{}{}
		}
		m.sets = append(m.sets, memberSet{start: start, keys: keys})
	}
	return nil
}

func (m *Members) at(i int) string {
	if i < inlineNames {
		return m.names[i]
	}
	return m.more[i-inlineNames]
}

// sameKey compares two held names: ASCII names as given, others as Fold
// keys, whose ASCII letters Fold has lowered. Lowering ASCII letters on
// both sides therefore compares fold keys, without allocating for the
// names real documents have (ASCII, often with capitals: "issuanceDate").
func sameKey(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		if lowerByte(a[i]) != lowerByte(b[i]) {
			return false
		}
	}
	return true
}

func lowerByte(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// lowerASCII is the map key of a held name: equal for names sameKey
// matches.
func lowerASCII(s string) string {
	for i := 0; i < len(s); i++ {
		if 'A' <= s[i] && s[i] <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				b[j] = lowerByte(b[j])
			}
			return string(b)
		}
	}
	return s
}
