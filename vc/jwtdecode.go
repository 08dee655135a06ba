package vc

import (
	"encoding/json"
	"strings"
)

// Decoding a VC-JWT's header and claims with jsonScan, into the same
// structs and with the same outcome as unmarshalObject (encoding/json and
// the UnmarshalJSON methods of fields.go) on every input whose objects do
// not repeat a member name: the same member selection (exact name, else
// case-folded), null leaving a string, date or scope list as it was and
// clearing a pointer or a string list. An input that repeats a name, at
// any depth and in any letter case, is refused (jsonkey.ErrRepeated),
// where encoding/json would decode the repeat over the earlier value: the
// issuer signed one reading, and another parser may act on the other. The
// shapes a KYA-OS or VC 2.0 credential uses are decoded here; rarer ones
// (an array of subjects, an issuer object) are handed, as text, to their
// UnmarshalJSON, which is what encoding/json would call.
// FuzzJWTDecodeMatchesJSON compares the two on arbitrary input, and
// FuzzJWTDecodeMatchesJWX the registered claims with jwx's reading.
//
// Why not jwx, which the module requires anyway: a credential that misses
// the result cache is parsed on every request, and jwx's parser, with the
// vc claim brought into this package's types, costs about twelve times
// this decoder, more than the rest of the verification together
// (BenchmarkParseJWTWithJWX and BenchmarkParseJWTWithJWS against
// BenchmarkParseJWT and BenchmarkVerifyMissEdDSA).

// Member names, as their json tags spell them.
var (
	headerNames = []string{"alg", "typ", "kid", "cty", "crit", "b64", "jku", "x5u", "jwk", "x5c"}
	// payloadNames: the credential's (embedded in jwtPayload) and the
	// claims'. None of them equals another under case folding, so the
	// order does not matter.
	payloadNames = []string{
		"@context", "id", "type", "issuer", "issuanceDate", "expirationDate", "validFrom",
		"validUntil", "credentialSubject", "credentialStatus",
		"iss", "sub", "aud", "exp", "nbf", "iat", "jti", "scope", "vc", "vp", "cnf",
	}
	credentialNames = payloadNames[:10]
	subjectNames    = []string{"id", "scope", "scopes", "constraints", "delegation", "type", "statusPurpose", "encodedList"}
	delegationNames = []string{"id", "subjectDid", "userDid", "scopes", "parentId", "parentCredentialUrl", "constraints"}
	constraintNames = []string{"scopes", "notBefore", "notAfter", "audience"}
)

// decodeJWSHeader decodes a protected header, which must be a JSON object.
func decodeJWSHeader(b []byte, h *jwsHeader) error {
	s := newJSONScan(b)
	return s.jwsHeader(h)
}

// jwsHeader decodes the whole text as a protected header.
func (s *jsonScan) jwsHeader(h *jwsHeader) error {
	err := s.object(func(key string) error {
		switch fieldName(key, headerNames) {
		case "alg":
			return s.str(&h.Alg)
		case "typ":
			return s.str(&h.Typ)
		case "kid":
			return s.str(&h.Kid)
		case "cty":
			return s.str(&h.Cty)
		case "crit":
			return s.raw(&h.Crit)
		case "b64":
			return s.raw(&h.B64)
		case "jku":
			return s.raw(&h.Jku)
		case "x5u":
			return s.raw(&h.X5u)
		case "jwk":
			return s.raw(&h.Jwk)
		case "x5c":
			return s.raw(&h.X5c)
		}
		_, err := s.skip()
		return err
	})
	if err != nil {
		return err
	}
	return s.end()
}

// decodeJWTPayload decodes JWT claims, which must be a JSON object.
func decodeJWTPayload(b []byte, jp *jwtPayload) error {
	s := newJSONScan(b)
	return s.jwtPayload(jp)
}

// jwtPayload decodes the whole text as JWT claims.
func (s *jsonScan) jwtPayload(jp *jwtPayload) error {
	err := s.object(func(key string) error {
		name := fieldName(key, payloadNames)
		switch name {
		case "iss":
			return s.str(&jp.Iss)
		case "sub":
			return s.str(&jp.Sub)
		case "aud":
			return s.stringList(&jp.Aud)
		case "exp":
			return s.numericDate(&jp.Exp)
		case "nbf":
			return s.numericDate(&jp.Nbf)
		case "iat":
			return s.numericDate(&jp.Iat)
		case "jti":
			return s.str(&jp.Jti)
		case "scope":
			return s.scopeList(&jp.Scope)
		case "vc":
			return s.credential(&jp.VC)
		case "vp":
			return s.raw(&jp.VP)
		case "cnf":
			return s.raw(&jp.Cnf)
		}
		return s.credentialMember(&jp.credential, name)
	})
	if err != nil {
		return err
	}
	return s.end()
}

// objectNext reports whether an object follows, for a member whose value
// is an object or null: it reads a null (false, and the null's error), and
// refuses anything else (false, errJSON).
func (s *jsonScan) objectNext() (bool, error) {
	switch s.peek() {
	case '{':
		return true, nil
	case 'n':
		return false, s.null()
	}
	return false, errJSON
}

// The credential, its delegation and their constraints are pointers: an
// object decodes into *p, which the claims' room allocates if nil, and
// null sets it to nil (and so does an error, which fails the decoding).

// orNew returns *p, setting it first to alloc() if it is nil.
func orNew[T any](p **T, alloc func() *T) *T {
	if *p == nil {
		*p = alloc()
	}
	return *p
}

func (s *jsonScan) credential(p **credential) error {
	if ok, err := s.objectNext(); !ok {
		*p = nil
		return err
	}
	c := orNew(p, s.room().credential)
	return s.object(func(key string) error {
		return s.credentialMember(c, fieldName(key, credentialNames))
	})
}

// credentialMember decodes the member name of c ("" skips the value).
func (s *jsonScan) credentialMember(c *credential, name string) error {
	switch name {
	case "@context":
		return s.raw(&c.Context)
	case "id":
		return s.str(&c.ID)
	case "type":
		return s.stringList(&c.Type)
	case "issuer":
		return s.issuer(&c.Issuer)
	case "issuanceDate":
		return s.dateTime(&c.IssuanceDate)
	case "expirationDate":
		return s.dateTime(&c.ExpirationDate)
	case "validFrom":
		return s.dateTime(&c.ValidFrom)
	case "validUntil":
		return s.dateTime(&c.ValidUntil)
	case "credentialSubject":
		return s.subject(&c.Subject)
	case "credentialStatus":
		return s.raw(&c.Status)
	}
	_, err := s.skip()
	return err
}

// subject decodes credentialSubject: an object into f's subject; the
// array form is left to subjectField.UnmarshalJSON.
func (s *jsonScan) subject(f *subjectField) error {
	switch s.peek() {
	case 'n':
		return s.null()
	case '{':
		sub := &f.subject
		err := s.object(func(key string) error {
			switch fieldName(key, subjectNames) {
			case "id":
				return s.str(&sub.ID)
			case "scope":
				return s.scopeList(&sub.Scope)
			case "scopes":
				return s.scopeList(&sub.Scopes)
			case "constraints":
				return s.constraints(&sub.Constraints)
			case "delegation":
				return s.delegation(&sub.Delegation)
			case "type":
				return s.raw(&sub.Type)
			case "statusPurpose":
				return s.raw(&sub.StatusPurpose)
			case "encodedList":
				return s.raw(&sub.EncodedList)
			}
			_, err := s.skip()
			return err
		})
		f.set = true
		return err
	case '[':
		b, err := s.skip()
		if err != nil {
			return err
		}
		// Through a copy: UnmarshalJSON hands its receiver to
		// encoding/json, which would move f, and the claims with it, to
		// the heap on every call, not only on this rare path.
		g := *f
		if g.UnmarshalJSON(b) != nil {
			return errJSON
		}
		*f = g
		return nil
	}
	return errJSON
}

func (s *jsonScan) delegation(p **delegationClaim) error {
	if ok, err := s.objectNext(); !ok {
		*p = nil
		return err
	}
	d := orNew(p, s.room().delegation)
	return s.object(func(key string) error {
		switch fieldName(key, delegationNames) {
		case "id":
			return s.str(&d.ID)
		case "subjectDid":
			return s.str(&d.SubjectDID)
		case "userDid":
			return s.str(&d.UserDID)
		case "scopes":
			return s.scopeList(&d.Scopes)
		case "parentId":
			return s.str(&d.ParentID)
		case "parentCredentialUrl":
			return s.str(&d.ParentURL)
		case "constraints":
			return s.constraints(&d.Constraints)
		}
		_, err := s.skip()
		return err
	})
}

func (s *jsonScan) constraints(p **constraints) error {
	if ok, err := s.objectNext(); !ok {
		*p = nil
		return err
	}
	c := orNew(p, s.room().constraints)
	start := s.c.Pos()
	err := s.object(func(key string) error {
		switch fieldName(key, constraintNames) {
		case "scopes":
			return s.scopeList(&c.Scopes)
		case "notBefore":
			return s.numericDate(&c.NotBefore)
		case "notAfter":
			return s.numericDate(&c.NotAfter)
		case "audience":
			return s.stringList(&c.Audience)
		}
		_, err := s.skip()
		return err
	})
	// A substring of the claims' text: kept without a copy, as the
	// decoded strings are.
	c.text = s.src[start:s.c.Offset()]
	return err
}

// nullOrString reads null (isNull) or a string; any other value is
// errJSON.
func (s *jsonScan) nullOrString() (v string, isNull bool, err error) {
	switch s.peek() {
	case 'n':
		return "", true, s.null()
	case '"':
		v, err = s.stringValue()
		return v, false, err
	}
	return "", false, errJSON
}

// str decodes a string member; null leaves it as it was.
func (s *jsonScan) str(dst *string) error {
	v, isNull, err := s.nullOrString()
	if !isNull { // on an error, v is "" and the decoding fails
		*dst = v
	}
	return err
}

// raw keeps a member's text, whatever its type (null too, as
// json.RawMessage does). It shares the decoded bytes.
func (s *jsonScan) raw(dst *json.RawMessage) error {
	b, err := s.skip()
	*dst = b
	return err
}

// strings decodes an array of strings; a null element is "". An empty
// array gives an empty, non-nil slice. The elements are gathered on the
// stack first, so that a short array costs one allocation.
func (s *jsonScan) strings() ([]string, error) {
	var buf [8]string
	list := buf[:0]
	err := s.array(func() error {
		var v string
		if err := s.str(&v); err != nil {
			return err
		}
		list = append(list, v)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(list) == 0 {
		return []string{}, nil
	}
	return s.keep(list...), nil
}

// keep copies list into the arena and returns the copy, capped so that
// appending to it cannot write over the next.
func (s *jsonScan) keep(list ...string) []string {
	if cap(s.arena)-len(s.arena) < len(list) {
		s.arena = s.room().strings(len(list))
	}
	start := len(s.arena)
	s.arena = append(s.arena, list...)
	return s.arena[start:len(s.arena):len(s.arena)]
}

// stringOrList reads null (isNull), a string (one, with list nil) or an
// array of strings (list, empty but not nil for []).
func (s *jsonScan) stringOrList() (one string, list []string, isNull bool, err error) {
	if s.peek() == '[' {
		list, err = s.strings()
		return "", list, false, err
	}
	one, isNull, err = s.nullOrString()
	return one, nil, isNull, err
}

// stringList: a string or an array of strings; null clears it.
func (s *jsonScan) stringList(l *stringList) error {
	one, list, isNull, err := s.stringOrList()
	switch {
	case err != nil:
		return err
	case isNull:
		*l = nil
	case list != nil:
		*l = list
	default:
		*l = s.keep(one)
	}
	return nil
}

// scopeList: an array, or a string of space-separated scopes; null
// leaves it as it was. Each list is decoded once (names do not repeat),
// so an array never lands on an earlier one, which encoding/json would
// decode it over.
func (s *jsonScan) scopeList(l *scopeList) error {
	one, list, isNull, err := s.stringOrList()
	if err != nil || isNull {
		return err
	}
	if list == nil {
		list = strings.Fields(one)
	}
	l.v, l.set = list, true
	return nil
}

// issuer: a string; null clears it; an object is left to
// issuerField.UnmarshalJSON.
func (s *jsonScan) issuer(f *issuerField) error {
	if s.peek() == '{' {
		b, err := s.skip()
		if err != nil {
			return err
		}
		if f.UnmarshalJSON(b) != nil {
			return errJSON
		}
		return nil
	}
	v, _, err := s.nullOrString() // null: ""
	if err == nil {
		*f = issuerField(v)
	}
	return err
}

// numericDate is numericDate.UnmarshalJSON on the member's text.
func (s *jsonScan) numericDate(n *numericDate) error {
	b, err := s.skip()
	if err != nil {
		return err
	}
	if n.UnmarshalJSON(b) != nil {
		return errJSON
	}
	return nil
}

// dateTime: a dateTime string; null leaves it as it was.
func (s *jsonScan) dateTime(d *dateTime) error {
	v, isNull, err := s.nullOrString()
	if err != nil || isNull {
		return err
	}
	t, err := parseDateTime(v)
	if err != nil {
		return errJSON
	}
	d.t, d.set = clampDate(t), true
	return nil
}
