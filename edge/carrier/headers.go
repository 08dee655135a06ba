package carrier

import (
	"io"
	"net/http"
	"slices"
	"strings"
	"unicode/utf8"
)

// Header names of the header carriers, in canonical form (Go canonicalizes
// incoming header keys, HTTP/2 included).
const (
	hdrAuthorization = "Authorization"
	// hdrDPoP holds the DPoP proof of a token sent with the DPoP scheme.
	hdrDPoP          = "Dpop"
	hdrKYADelegation = "Kya-Delegation"
	hdrKYAOSCred     = "Kya-Os-Delegation-Credential"
	hdrMCPICred      = "Mcp-I-Credential"
	// hdrMCPIDelegation names the credential sent in Mcp-I-Credential; it
	// travels with that carrier and is removed with it.
	hdrMCPIDelegation = "Mcp-I-Delegation"
	// hdrDelegationChain holds the ancestors of the credential.
	hdrDelegationChain = "Kya-Os-Delegation-Chain"
)

// headerCarriers maps the single-token header carriers to their header.
var headerCarriers = [...]struct {
	k    Kind
	name string
}{
	{KYADelegation, hdrKYADelegation},
	{KYAOSDelegationCredential, hdrKYAOSCred},
	{MCPICredential, hdrMCPICred},
}

// stripIdentityHeaders deletes every header a client could use to pose as a
// verified agent or user toward the upstream (the first step of the pipeline). Only the
// edge may set those. Names are compared after mapping '_' and '.' to '-' and
// lowering case, because many upstream stacks (CGI, PHP, nginx with
// underscores_in_headers, some Node frameworks) treat X_Agent_DID as
// X-Agent-DID while Go keeps the two apart.
//
// The enabled KYA-* carrier headers are kept, spelled exactly as the
// carrier: they are read in the next step and removed after verification.
// Underscore spellings of every carrier header go too: they are never read,
// and an upstream that normalizes names would otherwise see a credential the
// edge never checked.
func stripIdentityHeaders(h http.Header, enabled Set) {
	for k := range h {
		if isIdentityHeader(k, enabled) {
			delete(h, k)
		}
	}
	if conn, ok := h["Connection"]; ok {
		stripConnectionTokens(h, conn)
	}
}

// stripConnectionTokens removes identity header names from the Connection
// header. reverse_proxy deletes every header Connection names as
// hop-by-hop, after the edge has set its own: a client listing
// X-Verified-Delegation there would strip the edge's identity headers from
// an admitted request.
func stripConnectionTokens(h http.Header, conn []string) {
	named := false
	for _, v := range conn {
		for tok := range strings.SplitSeq(v, ",") {
			if isIdentityHeader(strings.TrimSpace(tok), 0) {
				named = true
			}
		}
	}
	if !named {
		return
	}
	var keep []string
	for _, v := range conn {
		for tok := range strings.SplitSeq(v, ",") {
			if tok = strings.TrimSpace(tok); tok != "" && !isIdentityHeader(tok, 0) {
				keep = append(keep, tok)
			}
		}
	}
	if len(keep) == 0 {
		delete(h, "Connection")
		return
	}
	h["Connection"] = []string{strings.Join(keep, ", ")}
}

var headerSeparators = strings.NewReplacer("_", "-", ".", "-")

// stripIdentityTrailers keeps identity headers and credentials out of
// request trailers, which reverse_proxy forwards. Trailers are declared in
// the headers but their values arrive after the body, so they are stripped
// now (the declared names) and again when the body reaches EOF (the values
// net/http merged in); nothing is read from them: the edge never takes a
// credential from a trailer.
func stripIdentityTrailers(r *http.Request) {
	if len(r.Trailer) == 0 || r.Body == nil {
		return
	}
	stripTrailer(r.Trailer)
	r.Body = &trailerStripper{ReadCloser: r.Body, r: r}
}

func stripTrailer(t http.Header) {
	for k := range t {
		if isIdentityHeader(k, 0) || strings.EqualFold(k, hdrMCPICred) || strings.EqualFold(k, hdrMCPIDelegation) {
			delete(t, k)
		}
	}
}

// trailerStripper strips the trailers once the body is read to EOF, before
// the reader above it (reverse_proxy) copies them.
type trailerStripper struct {
	io.ReadCloser
	r *http.Request
}

func (b *trailerStripper) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		stripTrailer(b.r.Trailer)
	}
	return n, err
}

func isIdentityHeader(k string, enabled Set) bool {
	// Cheap filter: every name we strip starts with x, k or m.
	if len(k) < 4 {
		return false
	}
	switch k[0] {
	case 'x', 'X', 'k', 'K', 'm', 'M':
	default:
		return false
	}
	switch k {
	case hdrKYADelegation:
		if enabled.Has(KYADelegation) {
			return false
		}
	case hdrKYAOSCred:
		if enabled.Has(KYAOSDelegationCredential) {
			return false
		}
	case hdrDelegationChain:
		if enabled.Has(KYAOSDelegationChain) {
			return false
		}
	case hdrMCPICred, hdrMCPIDelegation:
		return false
	}
	// Some upstream stacks (PHP, CGI) fold "_" and "." into "-": strip every
	// spelling that an upstream could read as one of our names.
	if !isASCIIString(k) {
		// Unicode letters whose lower case is ASCII (U+212A is k): the
		// general way, which allocates.
		return isIdentityName(strings.ToLower(headerSeparators.Replace(k)))
	}
	// ASCII, as every name net/http accepts is: compared in place, since
	// every header of every request comes here.
	for _, n := range identityNames {
		if sepFoldEqual(k, n) {
			return true
		}
	}
	return len(k) >= len("kya-") && sepFoldEqual(k[:len("kya-")], "kya-")
}

// identityNames are the identity headers, lower case with '-', besides
// every kya-* name. mcp-i-credential and mcp-i-delegation are reached only
// for spellings other than the canonical one.
var identityNames = [...]string{
	"x-agent-did", "x-user-did", "x-agent-reputation-score", "x-verified-delegation",
	"mcp-i-credential", "mcp-i-delegation",
}

// isIdentityName reports whether n, lower case with '-' separators, is an
// identity header name.
func isIdentityName(n string) bool {
	for _, name := range identityNames {
		if n == name {
			return true
		}
	}
	return strings.HasPrefix(n, "kya-")
}

// HeaderIs reports whether the header name k is one of names (lower case,
// '-' separated) as upstreams that fold '_' and '.' into '-' and ignore
// case read it: whether k, lower-cased with '_' and '.' read as '-', is
// one of them.
func HeaderIs(k string, names ...string) bool {
	if isASCIIString(k) {
		// Compared in place, as every header of every request may come here.
		for _, n := range names {
			if sepFoldEqual(k, n) {
				return true
			}
		}
		return false
	}
	// Unicode letters whose lower case is ASCII (U+212A is k): the
	// general way, which allocates.
	return slices.Contains(names, strings.ToLower(headerSeparators.Replace(k)))
}

// sepFoldEqual reports whether the ASCII name k is name (lower case, '-'
// separated) once '_' and '.' are read as '-' and case is ignored: what
// strings.ToLower(headerSeparators.Replace(k)) == name says for ASCII k.
func sepFoldEqual(k, name string) bool {
	if len(k) != len(name) {
		return false
	}
	for i := range len(k) {
		c := k[i]
		switch {
		case c == '_' || c == '.':
			c = '-'
		case 'A' <= c && c <= 'Z':
			c += 'a' - 'A'
		}
		if c != name[i] {
			return false
		}
	}
	return true
}

func isASCIIString(s string) bool {
	for i := range len(s) {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}
