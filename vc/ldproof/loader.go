package ldproof

import (
	"embed"

	"github.com/piprate/json-gold/ld"
)

// contextFS holds the embedded context documents; contexts/SOURCES.md says
// where each comes from.
//
//go:embed contexts/*.jsonld
var contextFS embed.FS

// embedded maps each context URL to its file under contexts/. Some
// documents are published under two URLs.
var embedded = map[string]string{
	"https://www.w3.org/2018/credentials/v1":                          "credentials-v1.jsonld",
	"https://www.w3.org/ns/credentials/v2":                            "credentials-v2.jsonld",
	"https://www.w3.org/ns/credentials/undefined-terms/v2":            "credentials-undefined-terms-v2.jsonld",
	"https://www.w3.org/ns/did/v1":                                    "did-v1.jsonld",
	"https://w3id.org/security/v1":                                    "security-v1.jsonld",
	"https://w3id.org/security/v2":                                    "security-v2.jsonld",
	"https://w3id.org/security/suites/ed25519-2018/v1":                "ed25519-2018-v1.jsonld",
	"https://w3id.org/security/suites/ed25519-2020/v1":                "ed25519-2020-v1.jsonld",
	"https://w3id.org/security/suites/jws-2020/v1":                    "jws-2020-v1.jsonld",
	"https://w3id.org/security/jws/v1":                                "jws-2020-v1.jsonld",
	"https://w3id.org/security/suites/secp256k1-2019/v1":              "secp256k1-2019-v1.jsonld",
	"https://w3id.org/security/data-integrity/v1":                     "data-integrity-v1.jsonld",
	"https://w3id.org/security/data-integrity/v2":                     "data-integrity-v2.jsonld",
	"https://w3id.org/vc/status-list/2021/v1":                         "status-list-2021-v1.jsonld",
	"https://schema.kya-os.org/v1/protocol/delegation/context/v1.0.0": "kya-delegation-v1.0.0.jsonld",
}

// maxLoads bounds the context documents dereferenced for one
// canonicalization (type-scoped contexts are loaded again each time).
const maxLoads = 256

// callLoader serves the Verifier's contexts to json-gold for one Verify
// call and records the first URL it does not have. It never fetches.
type callLoader struct {
	docs    map[string]*ld.RemoteDocument
	missing string
	loads   int
}

// LoadDocument implements ld.DocumentLoader.
func (l *callLoader) LoadDocument(url string) (*ld.RemoteDocument, error) {
	l.loads++
	if l.loads > maxLoads {
		return nil, failf(ErrMalformed, "more than %d context loads", maxLoads)
	}
	if d, ok := l.docs[url]; ok {
		return d, nil
	}
	if l.missing == "" {
		l.missing = url
	}
	return nil, &ContextError{URL: url}
}

// EmbeddedContexts returns the URLs of the embedded contexts.
func EmbeddedContexts() []string {
	out := make([]string, 0, len(embedded))
	for u := range embedded {
		out = append(out, u)
	}
	return out
}

var _ ld.DocumentLoader = (*callLoader)(nil)
