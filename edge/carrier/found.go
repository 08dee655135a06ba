package carrier

import (
	"bytes"
	"encoding/json"
)

// Credential is a credential found in one carrier.
type Credential struct {
	Carrier Kind
	// Raw is the credential exactly as presented: the header token, the
	// decoded JSON string, or the raw bytes of a JSON object. It is
	// read-only: a header token shares the memory of the header's string.
	Raw []byte
	// DPoP: the credential came in Authorization with the DPoP scheme
	// (RFC 9449 §7.1), which says the client holds a proof key for it.
	DPoP bool
}

// Found is what the carriers of one request hold.
type Found struct {
	// Credentials are in carrier order (Kind), then in the order of the
	// request; the first is the one to verify.
	Credentials []Credential
	// ForeignBearer: Authorization holds a bearer that is not a
	// delegation credential (someone else's token, left to the upstream).
	ForeignBearer bool
	// Body is the request body as received, when Find read it; nil if not.
	Body []byte
	// stripped is the body with the body carriers removed; nil when no
	// body carrier was found (or removal was not asked for).
	stripped []byte
}

// Conflicting reports whether the carriers hold different credentials.
// Values are compared after trimming; JSON credentials after
// canonicalization, so the same VC in a header and in the body (or as an
// object and as a string) is one credential.
func (f *Found) Conflicting() bool {
	if len(f.Credentials) < 2 {
		return false
	}
	first := normalizeCredential(f.Credentials[0].Raw)
	for _, p := range f.Credentials[1:] {
		if !bytes.Equal(first, normalizeCredential(p.Raw)) {
			return true
		}
	}
	return false
}

func normalizeCredential(raw []byte) []byte {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || t[0] != '{' {
		return t
	}
	dec := json.NewDecoder(bytes.NewReader(t))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil || dec.More() {
		return t
	}
	// encoding/json sorts map keys and escapes strings one way, which is
	// all a comparison needs.
	c, err := json.Marshal(v)
	if err != nil {
		return t
	}
	return c
}

// foundIn reports whether tok is a credential Find found in carrier k:
// Find already decided which bearers are delegations, and deciding again
// would decode every payload twice.
func (f *Found) foundIn(k Kind, tok string) bool {
	for i := range f.Credentials {
		if f.Credentials[i].Carrier == k && string(f.Credentials[i].Raw) == tok {
			return true
		}
	}
	return false
}
