package didresolver

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"

	"github.com/decred/dcrd/dcrec/secp256k1/v4"
	"github.com/mcpi-edge/caddy-mcpi/internal/jsonscan"
	"github.com/mr-tron/base58"
)

// Document is a DID document (W3C DID Core), reduced to what verification
// needs. Documents returned by resolvers may be shared between callers (the
// cache hands out one value): treat them as read-only.
type Document struct {
	Context            any                  `json:"@context,omitempty"`
	ID                 string               `json:"id"`
	Controller         any                  `json:"controller,omitempty"`
	VerificationMethod []VerificationMethod `json:"verificationMethod,omitempty"`
	Authentication     []MethodRef          `json:"authentication,omitempty"`
	AssertionMethod    []MethodRef          `json:"assertionMethod,omitempty"`
	Service            []Service            `json:"service,omitempty"`
}

// MethodRef is an entry of a verification relationship: either a reference
// (a string id, absolute or relative "#frag") or an embedded method.
type MethodRef struct {
	Ref      string
	Embedded *VerificationMethod
}

// UnmarshalJSON accepts the two forms DID Core allows: a string id or an
// embedded verification method object.
func (r *MethodRef) UnmarshalJSON(data []byte) error {
	data = bytes.TrimSpace(data)
	switch {
	case len(data) > 0 && data[0] == '"':
		var s string
		if err := json.Unmarshal(data, &s); err != nil {
			return err
		}
		*r = MethodRef{Ref: s}
		return nil
	case len(data) > 0 && data[0] == '{':
		var vm VerificationMethod
		if err := json.Unmarshal(data, &vm); err != nil {
			return err
		}
		*r = MethodRef{Embedded: &vm}
		return nil
	default:
		return errors.New("verification relationship entry must be a string or an object")
	}
}

// MarshalJSON writes the embedded method if there is one, else the reference.
func (r MethodRef) MarshalJSON() ([]byte, error) {
	if r.Embedded != nil {
		return json.Marshal(r.Embedded)
	}
	return json.Marshal(r.Ref)
}

// VerificationMethod is one key of a DID document.
type VerificationMethod struct {
	ID                 string         `json:"id"`
	Type               string         `json:"type"`
	Controller         string         `json:"controller,omitempty"`
	PublicKeyJwk       map[string]any `json:"publicKeyJwk,omitempty"`
	PublicKeyMultibase string         `json:"publicKeyMultibase,omitempty"`
	PublicKeyBase58    string         `json:"publicKeyBase58,omitempty"`
}

// Service is a service entry of a DID document. Type may be a string or a
// list of strings in JSON; Types returns it normalised.
type Service struct {
	ID              string `json:"id"`
	Type            any    `json:"type"`
	ServiceEndpoint any    `json:"serviceEndpoint"`
}

// ParseDocument parses and structurally validates a DID document.
//
// It checks structure, not keys: a method of a key type this package does
// not support is kept (Keys skips it, Key reports ErrUnsupportedKey), so one
// exotic key does not make a whole document unusable.
func ParseDocument(data []byte) (*Document, error) {
	// Before decoding, which would merge a repeated member out of sight.
	// Syntax errors are left to json.Unmarshal, which says what they are.
	if errors.Is(jsonscan.CheckMembers(data), ErrRepeatedMember) {
		return nil, fmt.Errorf("%w: %w", ErrInvalidDocument, ErrRepeatedMember)
	}
	var doc Document
	if err := json.Unmarshal(data, &doc); err != nil {
		// The JSON error text can quote the input; report only its kind.
		return nil, fmt.Errorf("%w: not a JSON DID document (%s)", ErrInvalidDocument, jsonErrorKind(err))
	}
	if err := doc.validate(); err != nil {
		return nil, err
	}
	return &doc, nil
}

func jsonErrorKind(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return "wrong type for " + strings.TrimSpace(te.Field)
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("syntax error at offset %d", se.Offset)
	}
	return "malformed"
}

func (d *Document) validate() error {
	id, err := ParseDID(d.ID)
	if err != nil || id.Fragment != "" {
		return fmt.Errorf("%w: id is missing or not a DID", ErrInvalidDocument)
	}
	// Method ids must be unique: with two methods of one id, which key a kid
	// names would depend on lookup order.
	seen := make(map[string]*VerificationMethod)
	for i := range d.VerificationMethod {
		vm := &d.VerificationMethod[i]
		abs, err := d.checkMethod(vm)
		if err != nil {
			return err
		}
		if seen[abs] != nil {
			return fmt.Errorf("%w: duplicate verification method id", ErrInvalidDocument)
		}
		seen[abs] = vm
	}
	for _, rel := range [][]MethodRef{d.Authentication, d.AssertionMethod} {
		for _, r := range rel {
			if r.Embedded == nil {
				if _, err := d.absolute(r.Ref); err != nil {
					return fmt.Errorf("%w: invalid verification method reference", ErrInvalidDocument)
				}
				continue
			}
			abs, err := d.checkMethod(r.Embedded)
			if err != nil {
				return err
			}
			// The same embedded method may appear under several relationships,
			// but an id may not stand for two different keys.
			if prev := seen[abs]; prev != nil && !reflect.DeepEqual(prev, r.Embedded) {
				return fmt.Errorf("%w: duplicate verification method id", ErrInvalidDocument)
			}
			seen[abs] = r.Embedded
		}
	}
	for _, s := range d.Service {
		if err := s.validate(); err != nil {
			return err
		}
	}
	return nil
}

func (d *Document) checkMethod(vm *VerificationMethod) (string, error) {
	abs, err := d.absolute(vm.ID)
	if err != nil {
		return "", fmt.Errorf("%w: verification method id is not a DID URL with a fragment", ErrInvalidDocument)
	}
	if vm.Type == "" {
		return "", fmt.Errorf("%w: verification method without type", ErrInvalidDocument)
	}
	return abs, nil
}

// absolute resolves a method id against the document id. Only fragment
// references are relative; the result must be a DID URL with a fragment.
func (d *Document) absolute(ref string) (string, error) {
	if strings.HasPrefix(ref, "#") {
		ref = d.ID + ref
	}
	p, err := ParseDID(ref)
	if err != nil {
		return "", err
	}
	if p.Fragment == "" {
		return "", fmt.Errorf("%w: method id has no fragment", ErrInvalidDID)
	}
	return ref, nil
}

func (s Service) validate() error {
	if s.ID == "" {
		return fmt.Errorf("%w: service without id", ErrInvalidDocument)
	}
	switch t := s.Type.(type) {
	case string:
		if t == "" {
			return fmt.Errorf("%w: service with empty type", ErrInvalidDocument)
		}
	case []any:
		if len(t) == 0 {
			return fmt.Errorf("%w: service with empty type list", ErrInvalidDocument)
		}
		for _, v := range t {
			if str, ok := v.(string); !ok || str == "" {
				return fmt.Errorf("%w: service type must be strings", ErrInvalidDocument)
			}
		}
	default:
		return fmt.Errorf("%w: service type must be a string or a list of strings", ErrInvalidDocument)
	}
	switch e := s.ServiceEndpoint.(type) {
	case string, map[string]any:
	case []any:
		for _, v := range e {
			switch v.(type) {
			case string, map[string]any:
			default:
				return fmt.Errorf("%w: service endpoint entries must be strings or maps", ErrInvalidDocument)
			}
		}
	default:
		return fmt.Errorf("%w: service endpoint must be a string, a map or a list", ErrInvalidDocument)
	}
	return nil
}

// Types returns the service's type(s).
func (s Service) Types() []string {
	switch t := s.Type.(type) {
	case string:
		return []string{t}
	case []string:
		return append([]string(nil), t...)
	case []any:
		out := make([]string, 0, len(t))
		for _, v := range t {
			if str, ok := v.(string); ok {
				out = append(out, str)
			}
		}
		return out
	}
	return nil
}

// Endpoints returns the service's endpoint URL(s) (string, list or map forms).
// Map values are taken in key order so the result is deterministic.
func (s Service) Endpoints() []string {
	var out []string
	var walk func(v any, depth int)
	walk = func(v any, depth int) {
		if depth > 2 {
			return
		}
		switch e := v.(type) {
		case string:
			out = append(out, e)
		case []string:
			out = append(out, e...)
		case []any:
			for _, x := range e {
				walk(x, depth+1)
			}
		case map[string]any:
			keys := make([]string, 0, len(e))
			for k := range e {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				walk(e[k], depth+1)
			}
		}
	}
	walk(s.ServiceEndpoint, 0)
	return out
}

// relationship returns the entries of rel, or false for relationships the
// document does not model.
func (d *Document) relationship(rel Relationship) ([]MethodRef, bool) {
	switch rel {
	case Authentication:
		return d.Authentication, true
	case AssertionMethod:
		return d.AssertionMethod, true
	}
	return nil, false
}

// method finds a method by absolute id, in verificationMethod or embedded in
// any relationship.
func (d *Document) method(abs string) *VerificationMethod {
	for i := range d.VerificationMethod {
		if id, err := d.absolute(d.VerificationMethod[i].ID); err == nil && id == abs {
			return &d.VerificationMethod[i]
		}
	}
	for _, rel := range [][]MethodRef{d.Authentication, d.AssertionMethod} {
		for _, r := range rel {
			if r.Embedded != nil {
				if id, err := d.absolute(r.Embedded.ID); err == nil && id == abs {
					return r.Embedded
				}
			}
		}
	}
	return nil
}

// authorized returns the method listed under rel with id abs: the embedded
// one if rel embeds it (an embedded method is authorized only where it is
// embedded), else the referenced one.
func (d *Document) authorized(abs string, rel Relationship) *VerificationMethod {
	refs, _ := d.relationship(rel)
	for _, r := range refs {
		if r.Embedded != nil {
			if id, err := d.absolute(r.Embedded.ID); err == nil && id == abs {
				return r.Embedded
			}
			continue
		}
		if id, err := d.absolute(r.Ref); err == nil && id == abs {
			for i := range d.VerificationMethod {
				if vid, err := d.absolute(d.VerificationMethod[i].ID); err == nil && vid == abs {
					return &d.VerificationMethod[i]
				}
			}
			return nil
		}
	}
	return nil
}

// Key returns the key with verification method id kid (absolute, or relative
// "#frag" against d.ID), which must be listed under rel.
func (d *Document) Key(kid string, rel Relationship) (Key, error) {
	abs, err := d.absolute(kid)
	if err != nil {
		return Key{}, fmt.Errorf("%w: key id is not a DID URL with a fragment", ErrKeyNotFound)
	}
	if d.method(abs) == nil {
		return Key{}, fmt.Errorf("%w: no verification method with that id", ErrKeyNotFound)
	}
	if _, ok := d.relationship(rel); !ok {
		return Key{}, fmt.Errorf("%w: unknown relationship %q", ErrKeyNotAuthorized, string(rel))
	}
	vm := d.authorized(abs, rel)
	if vm == nil {
		return Key{}, fmt.Errorf("%w: method not listed under %s", ErrKeyNotAuthorized, string(rel))
	}
	pub, err := vm.PublicKey()
	if err != nil {
		return Key{}, err
	}
	return Key{ID: abs, Public: pub}, nil
}

// Keys returns every usable key listed under rel, in document order.
func (d *Document) Keys(rel Relationship) []Key {
	var out []Key
	for _, abs := range d.listed(rel) {
		if k, err := d.Key(abs, rel); err == nil {
			out = append(out, k)
		}
	}
	return out
}

// listed returns the distinct absolute method ids listed under rel.
func (d *Document) listed(rel Relationship) []string {
	refs, _ := d.relationship(rel)
	var out []string
	seen := make(map[string]bool)
	for _, r := range refs {
		id := r.Ref
		if r.Embedded != nil {
			id = r.Embedded.ID
		}
		abs, err := d.absolute(id)
		if err != nil || seen[abs] {
			continue
		}
		seen[abs] = true
		out = append(out, abs)
	}
	return out
}

// PublicKey decodes the method's key (publicKeyJwk, publicKeyMultibase or
// publicKeyBase58).
//
// When several encodings are present they must agree: a verifier that reads
// one and a wallet that reads another must not see different keys. The
// method type constrains the curve where it names one.
func (m *VerificationMethod) PublicKey() (crypto.PublicKey, error) {
	var found []crypto.PublicKey
	if m.PublicKeyJwk != nil {
		k, err := parseJWK(m.PublicKeyJwk, false)
		if err != nil {
			return nil, err
		}
		found = append(found, k)
	}
	if m.PublicKeyMultibase != "" {
		k, err := m.multibaseKey()
		if err != nil {
			return nil, err
		}
		found = append(found, k)
	}
	if m.PublicKeyBase58 != "" {
		k, err := m.base58Key()
		if err != nil {
			return nil, err
		}
		found = append(found, k)
	}
	if len(found) == 0 {
		return nil, fmt.Errorf("%w: verification method has no supported key encoding", ErrUnsupportedKey)
	}
	for _, k := range found[1:] {
		if !samePublicKey(found[0], k) {
			return nil, fmt.Errorf("%w: verification method encodes conflicting keys", ErrUnsupportedKey)
		}
	}
	if err := checkTypeMatches(m.Type, found[0]); err != nil {
		return nil, err
	}
	return found[0], nil
}

func (m *VerificationMethod) multibaseKey() (crypto.PublicKey, error) {
	// Early Ed25519VerificationKey2020 documents put the raw 32 bytes in
	// publicKeyMultibase; the suite now says multicodec-prefixed. The two are
	// told apart by length, so both are accepted.
	if len(m.PublicKeyMultibase) > maxKeyIDLength {
		return nil, fmt.Errorf("%w: publicKeyMultibase too long", ErrUnsupportedKey)
	}
	if m.Type == "Ed25519VerificationKey2020" && len(m.PublicKeyMultibase) > 1 && m.PublicKeyMultibase[0] == 'z' {
		if raw, err := decodeBase58(m.PublicKeyMultibase[1:]); err == nil && len(raw) == ed25519.PublicKeySize {
			return parseEd25519(raw)
		}
	}
	return decodeMultibaseKey(m.PublicKeyMultibase)
}

// base58Key decodes the raw (unprefixed) key bytes of the 2018/2019 suites.
func (m *VerificationMethod) base58Key() (crypto.PublicKey, error) {
	if len(m.PublicKeyBase58) > maxKeyIDLength {
		return nil, fmt.Errorf("%w: publicKeyBase58 too long", ErrUnsupportedKey)
	}
	raw, err := base58.Decode(m.PublicKeyBase58)
	if err != nil || base58.Encode(raw) != m.PublicKeyBase58 {
		return nil, fmt.Errorf("%w: invalid publicKeyBase58", ErrUnsupportedKey)
	}
	switch m.Type {
	case "Ed25519VerificationKey2018", "Ed25519VerificationKey2020":
		return parseEd25519(raw)
	case "EcdsaSecp256k1VerificationKey2019":
		return parseSecp256k1Compressed(raw)
	default:
		return nil, fmt.Errorf("%w: publicKeyBase58 with an unsupported method type", ErrUnsupportedKey)
	}
}

func checkTypeMatches(typ string, k crypto.PublicKey) error {
	var ok bool
	switch typ {
	case "Ed25519VerificationKey2018", "Ed25519VerificationKey2020":
		_, ok = k.(ed25519.PublicKey)
	case "EcdsaSecp256k1VerificationKey2019":
		_, ok = k.(*secp256k1.PublicKey)
	case "EcdsaSecp256r1VerificationKey2019":
		_, ok = k.(*ecdsa.PublicKey)
	default:
		// Multikey, JsonWebKey2020, JsonWebKey and others carry the curve in
		// the key material itself.
		ok = true
	}
	if !ok {
		return fmt.Errorf("%w: key does not match the method type", ErrUnsupportedKey)
	}
	return nil
}

func samePublicKey(a, b crypto.PublicKey) bool {
	switch x := a.(type) {
	case ed25519.PublicKey:
		return x.Equal(b)
	case *ecdsa.PublicKey:
		return x.Equal(b)
	case *secp256k1.PublicKey:
		y, ok := b.(*secp256k1.PublicKey)
		return ok && x.IsEqual(y)
	}
	return false
}
