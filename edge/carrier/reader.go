package carrier

import (
	"net/http"
	"strings"
	"unsafe"
)

// Config is what a Reader reads.
type Config struct {
	// Enabled are the carriers read; the others are not looked at (a
	// disabled KYA-* header is stripped as an identity header).
	Enabled Set
	// MaxBody bounds the request bodies Find reads.
	MaxBody int64
	// Passthrough: the credential and the chain travel on to the upstream,
	// so Remove, RemoveHeaders and TakeChain leave the request as it is.
	Passthrough bool
}

// Reader reads and removes the carriers of requests. It is safe for
// concurrent use.
type Reader struct {
	cfg     Config
	bearers *bearerMemo
}

// New returns a Reader for cfg.
func New(cfg Config) *Reader {
	return &Reader{cfg: cfg, bearers: newBearerMemo()}
}

// StripIdentity removes from r every identity header a client sent, and
// keeps identity headers out of its trailers; see stripIdentityHeaders.
// Only the edge may set those: this is the first thing done to a request.
func (rd *Reader) StripIdentity(r *http.Request) {
	stripIdentityHeaders(r.Header, rd.cfg.Enabled)
	stripIdentityTrailers(r)
}

// Find returns the credentials in every enabled carrier of r. It may read
// the body (a POST with a JSON content type only, up to MaxBody:
// ErrBodyTooLarge, ErrBodyRead); the body is always put back exactly as
// received, so nothing downstream can tell. A body it reads that is not
// valid JSON is ErrBodyNotJSON, with the headers' credentials and the body
// in Found all the same.
func (rd *Reader) Find(w http.ResponseWriter, r *http.Request) (Found, error) {
	f := rd.findHeaders(r, rd.cfg.Enabled)
	if rd.cfg.Enabled&inBody == 0 || !WantsBody(r) {
		return f, nil
	}
	body, err := ReadBody(w, r, rd.cfg.MaxBody)
	if err != nil {
		return f, err
	}
	f.Body = body
	if len(body) == 0 {
		return f, nil // an empty body holds nothing
	}
	// A JSON body the edge cannot read (a BOM before it, NaN, …) is read
	// by lenient parsers (Python's json.loads, Express), which would find
	// a body carrier the edge never saw, verified or stripped: refused.
	found, stripped, ok := scanBody(body, rd.cfg.Enabled, !rd.cfg.Passthrough)
	if !ok {
		return f, ErrBodyNotJSON
	}
	f.Credentials = append(f.Credentials, found...)
	f.stripped = stripped
	return f, nil
}

// findHeaders reads the header carriers of enabled.
func (rd *Reader) findHeaders(r *http.Request, enabled Set) Found {
	var f Found
	if enabled.Has(Authorization) {
		// The names are canonical already: the map is read directly,
		// without Values canonicalizing them again on every request.
		for _, v := range r.Header[hdrAuthorization] {
			tok, isDPoP, ok := authToken(v)
			if !ok {
				continue // Basic, …: not ours, not a bearer
			}
			switch {
			case rd.bearers.isDelegation(tok):
				f.Credentials = append(f.Credentials, Credential{Carrier: Authorization, Raw: headerBytes(tok), DPoP: isDPoP})
			case !isDPoP:
				f.ForeignBearer = true
			}
			// Someone else's DPoP token is the upstream's, with its
			// DPoP header: neither read nor refused here.
		}
	}
	for _, hc := range headerCarriers {
		if !enabled.Has(hc.k) {
			continue
		}
		for _, v := range r.Header[hc.name] {
			if v = strings.TrimSpace(v); v != "" {
				f.Credentials = append(f.Credentials, Credential{Carrier: hc.k, Raw: headerBytes(v)})
			}
		}
	}
	return f
}

// headerBytes is the header value s as bytes, without copying it: a
// KYA-OS credential is about 2 KB, copied on every request otherwise. The
// bytes are s's, which must never change: Credential.Raw is read-only
// (nothing in carrier, edge or vc writes into a credential, and its
// capacity is its length, so an append copies).
func headerBytes(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// Remove deletes every carrier that held the credential f found, once it
// was verified: it was for the edge and does not travel on. A foreign
// bearer in Authorization stays: it belongs to the upstream.
func (rd *Reader) Remove(r *http.Request, f Found) {
	if rd.cfg.Passthrough {
		return
	}
	removeCarriers(r, &f, rd.cfg.Enabled)
	if f.stripped != nil {
		SetBody(r, f.stripped)
	}
}

// RemoveHeaders deletes the header carriers' credentials from r without
// reading its body: for a request that needs none but may carry one
// anyway (a handshake call).
func (rd *Reader) RemoveHeaders(r *http.Request) {
	if rd.cfg.Passthrough {
		return
	}
	hdrOnly := rd.cfg.Enabled &^ inBody
	f := rd.findHeaders(r, hdrOnly)
	removeCarriers(r, &f, hdrOnly)
}

// removeCarriers deletes the header carriers of enabled, and the tokens
// of Authorization that f holds as credentials. The DPoP proof goes with
// the credential it was made for: it is the edge's, and the upstream has
// no use for it (unless a DPoP token that is not ours stays, whose proof
// it is).
func removeCarriers(r *http.Request, f *Found, enabled Set) {
	if enabled.Has(Authorization) {
		if vals := r.Header[hdrAuthorization]; len(vals) > 0 {
			kept := vals[:0:0]
			foreignDPoP := false
			for _, v := range vals {
				tok, isDPoP, ok := authToken(v)
				if ok && f.foundIn(Authorization, tok) {
					continue
				}
				foreignDPoP = foreignDPoP || isDPoP
				kept = append(kept, v)
			}
			if len(kept) != len(vals) && !foreignDPoP {
				delete(r.Header, hdrDPoP)
			}
			if len(kept) == 0 {
				delete(r.Header, hdrAuthorization)
			} else if len(kept) != len(vals) {
				r.Header[hdrAuthorization] = kept
			}
		}
	}
	for _, hc := range headerCarriers {
		if enabled.Has(hc.k) {
			delete(r.Header, hc.name)
		}
	}
	if enabled.Has(MCPICredential) {
		delete(r.Header, hdrMCPIDelegation)
	}
}

// TakeChain returns the values of the chain header (KYA-OS-Delegation-Chain)
// and, unless the credential passes through, removes it from the request:
// it never reaches the upstream, whether the request is then admitted,
// rejected, admitted anonymously or handed to the handshake. Nil when the
// carrier is off. ParseChain reads the values.
func (rd *Reader) TakeChain(r *http.Request) []string {
	if !rd.cfg.Enabled.Has(KYAOSDelegationChain) {
		return nil
	}
	vals := r.Header.Values(hdrDelegationChain)
	if !rd.cfg.Passthrough {
		r.Header.Del(hdrDelegationChain)
	}
	return vals
}
