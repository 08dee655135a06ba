package ldproof

import (
	"fmt"
	"os"
)

// Option configures a Verifier.
type Option func(*config)

type config struct {
	extra  map[string][]byte
	inline bool
	err    error
}

// WithContextFile serves the JSON-LD context document in the file at path
// for url, read once by New. It adds to (or replaces) the embedded
// contexts; credentials naming a context that is neither embedded nor
// supplied fail with ErrContext. Supply only documents you trust: a
// context decides what the signature covers.
func WithContextFile(url, path string) Option {
	return func(c *config) {
		b, err := os.ReadFile(path)
		if err != nil {
			c.fail(fmt.Errorf("ldproof: context file for %s: %w", url, err))
			return
		}
		c.extra[url] = b
	}
}

// WithContext serves doc, a JSON-LD context document, for url. See
// WithContextFile.
func WithContext(url string, doc []byte) Option {
	return func(c *config) { c.extra[url] = append([]byte(nil), doc...) }
}

// WithInlineContexts accepts credentials whose @context holds embedded
// context objects (and nested @context members), which are otherwise
// refused with ErrInlineContext. Off by default: an inline
// context is not covered by the signature, so a forwarder could remap
// terms (for instance point "scopes" at the IRI of another signed member)
// without breaking it. Turn it on only when the JSON a credential carries
// is not used beyond its signed RDF.
func WithInlineContexts() Option {
	return func(c *config) { c.inline = true }
}

func (c *config) fail(err error) {
	if c.err == nil {
		c.err = err
	}
}
