package edge

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/mcpi-edge/caddy-mcpi/internal/jsonscan"
)

// carrier is one place a client can put its delegation credential
// (MCPI-WIRE §1). The order is the order carriers are reported in, so the
// credential that gets verified is the first one found in this order.
type carrier uint8

const (
	carrierAuthorization carrier = iota
	carrierKYADelegation
	carrierKYAOSDelegationCredential
	carrierMCPICredential
	carrierDelegationToken
	carrierMCPIDelegation
	// carrierKYAOSDelegationChain carries the ancestors of the credential
	// (KYA-OS-Delegation-Chain), never a credential: it does not count for
	// conflicts or for "no credential" (delegation.go).
	carrierKYAOSDelegationChain
	numCarriers
)

var carrierNames = [numCarriers]string{
	"authorization",
	"kya_delegation",
	"kya_os_delegation_credential",
	"mcp_i_credential",
	"delegation_token",
	"mcpi_delegation",
	"kya_os_delegation_chain",
}

func (c carrier) String() string {
	if c < numCarriers {
		return carrierNames[c]
	}
	return "carrier(" + strconv.Itoa(int(c)) + ")"
}

// carrierSet is a bit set of carriers.
type carrierSet uint8

const allCarriers = carrierSet(1<<numCarriers - 1)

func (s carrierSet) has(c carrier) bool { return s&(1<<c) != 0 }

// bodyCarriers are the carriers that need the request body.
const bodyCarriers = carrierSet(1<<carrierDelegationToken | 1<<carrierMCPIDelegation)

// parseCarriers turns config names into a set; no names means all carriers.
func parseCarriers(names []string) (carrierSet, error) {
	if len(names) == 0 {
		return allCarriers, nil
	}
	var s carrierSet
	for _, n := range names {
		c, ok := carrierByName(n)
		if !ok {
			return 0, fmt.Errorf("mcpi: unknown carrier %q (want one of %s)", n, strings.Join(carrierNames[:], ", "))
		}
		s |= 1 << c
	}
	return s, nil
}

func carrierByName(name string) (carrier, bool) {
	for i, n := range carrierNames {
		if n == name {
			return carrier(i), true
		}
	}
	return 0, false
}

// presented is a credential found in one carrier.
type presented struct {
	carrier carrier
	// raw is the credential exactly as presented: the header token, the
	// decoded JSON string, or the raw bytes of a JSON object.
	raw []byte
}

// extraction is what the carriers of one request hold.
type extraction struct {
	found []presented
	// foreignBearer: Authorization holds a bearer that is not a VC/VP JWT.
	foreignBearer bool
	// strippedBody is the body with the body carriers removed; nil when no
	// body carrier was found (or removal was not asked for).
	strippedBody []byte
	// body is the request body as received, when it was read; nil if not.
	body []byte
}

// Errors of carrier extraction; respond.go maps them to statuses.
var (
	errNoCredential  = errors.New("no delegation credential presented")
	errConflict      = errors.New("conflicting delegation credentials")
	errBodyTooLarge  = errors.New("request body too large")
	errBodyRead      = errors.New("request body could not be read")
	errForeignBearer = errors.New("bearer token is not a delegation credential")
	errBodyNotJSON   = errors.New("request body is not valid JSON")
)

// extract finds the credentials in every enabled carrier. It may read the
// body (POST with a JSON content type only, up to maxBody); the body is
// always put back exactly as received, so nothing downstream can tell. A
// body it reads that is not valid JSON is errBodyNotJSON.
func extract(w http.ResponseWriter, r *http.Request, enabled carrierSet, maxBody int64, strip bool) (extraction, error) {
	return extractWith(nil, w, r, enabled, maxBody, strip)
}

// extractWith is extract, recognizing delegation bearers through memo (nil
// for none).
func extractWith(memo *bearerMemo, w http.ResponseWriter, r *http.Request, enabled carrierSet, maxBody int64, strip bool) (extraction, error) {
	var ex extraction

	if enabled.has(carrierAuthorization) {
		// The names are canonical already: the map is read directly,
		// without Values canonicalizing them again on every request.
		for _, v := range r.Header[hdrAuthorization] {
			tok, ok := bearerToken(v)
			if !ok {
				continue // Basic, DPoP, …: not ours, not a bearer
			}
			if memo.isDelegation(tok) {
				ex.found = append(ex.found, presented{carrierAuthorization, []byte(tok)})
			} else {
				ex.foreignBearer = true
			}
		}
	}
	for _, hc := range headerCarriers {
		if !enabled.has(hc.c) {
			continue
		}
		for _, v := range r.Header[hc.name] {
			if v = strings.TrimSpace(v); v != "" {
				ex.found = append(ex.found, presented{hc.c, []byte(v)})
			}
		}
	}

	if enabled&bodyCarriers == 0 || !wantsBody(r) {
		return ex, nil
	}
	body, err := readBody(w, r, maxBody)
	if err != nil {
		return ex, err
	}
	ex.body = body
	if len(body) > 0 && !jsonscan.Valid(body) {
		// A JSON body the edge cannot read (a BOM before it, NaN, …) is
		// read by lenient parsers (Python's json.loads, Express), which
		// would find a body carrier the edge never saw, verified or
		// stripped: refused, 400. An empty one holds nothing.
		return ex, errBodyNotJSON
	}
	found, stripped := extractBody(body, enabled, strip)
	ex.found = append(ex.found, found...)
	ex.strippedBody = stripped
	return ex, nil
}

// conflicting reports whether the carriers hold different credentials.
// Values are compared after trimming; JSON credentials after
// canonicalization, so the same VC in a header and in the body (or as an
// object and as a string) is one credential.
func conflicting(found []presented) bool {
	if len(found) < 2 {
		return false
	}
	first := normalizeCredential(found[0].raw)
	for _, p := range found[1:] {
		if !bytes.Equal(first, normalizeCredential(p.raw)) {
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

// removeCarriers deletes every carrier that held the credential (step 6
// of ServeHTTP). A foreign bearer in Authorization stays: it belongs to the
// upstream.
// foundIn reports whether tok is a credential extract found in carrier c:
// extract already decided which bearers are delegations, and deciding again
// would decode every payload twice.
func (ex *extraction) foundIn(c carrier, tok string) bool {
	for i := range ex.found {
		if ex.found[i].carrier == c && string(ex.found[i].raw) == tok {
			return true
		}
	}
	return false
}

func removeCarriers(r *http.Request, ex extraction, enabled carrierSet) {
	if enabled.has(carrierAuthorization) {
		if vals := r.Header[hdrAuthorization]; len(vals) > 0 {
			kept := vals[:0:0]
			for _, v := range vals {
				if tok, ok := bearerToken(v); ok && ex.foundIn(carrierAuthorization, tok) {
					continue
				}
				kept = append(kept, v)
			}
			if len(kept) == 0 {
				delete(r.Header, hdrAuthorization)
			} else if len(kept) != len(vals) {
				r.Header[hdrAuthorization] = kept
			}
		}
	}
	for _, hc := range headerCarriers {
		if enabled.has(hc.c) {
			delete(r.Header, hc.name)
		}
	}
	if enabled.has(carrierMCPICredential) {
		delete(r.Header, hdrMCPIDelegation)
	}
	if ex.strippedBody != nil {
		setBody(r, ex.strippedBody)
	}
}

// JSON-RPC body carriers.
//
// The body is scanned by hand, once jsonscan found it valid JSON, instead
// of being decoded into maps: a decode/re-encode would reorder keys and
// reformat numbers in every message, while only the members that held the
// credential must go.
// Keys are matched case-insensitively, as encoding/json does for struct
// fields, so "DelegationToken" cannot smuggle a second credential past the
// edge to a Go upstream; duplicate keys are all read and all removed, since
// parsers disagree on which duplicate wins.

// IsCarrier reports whether name is a carrier Config.Carriers may list.
func IsCarrier(name string) bool {
	_, ok := carrierByName(name)
	return ok
}
