package carrier

import (
	"bytes"
	"errors"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"
)

// HasBody reports whether r may carry a body.
func HasBody(r *http.Request) bool {
	return r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0
}

// Bodyless reports whether method (upper case) carries no JSON-RPC in MCP.
func Bodyless(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodDelete, http.MethodTrace, http.MethodConnect:
		return true
	}
	return false
}

// WantsBody reports whether r is a POST with a JSON body: only such a
// request can hold a JSON-RPC carrier. GET (SSE streams) and everything
// else is never read, so streams stay streams.
func WantsBody(r *http.Request) bool {
	if r.Method != http.MethodPost || r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return false
	}
	return isJSONContentType(r.Header.Get("Content-Type"))
}

// isJSONContentType reports whether a Content-Type value names JSON,
// whatever its parameters.
func isJSONContentType(ct string) bool { return IsJSONMediaType(MediaType(ct)) }

// IsJSONMediaType reports whether a media type (lower case, as MediaType
// returns it) is JSON.
func IsJSONMediaType(mt string) bool {
	switch mt {
	case "application/json", "application/json-rpc", "application/jsonrequest":
		return true
	}
	return strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json")
}

// MediaType returns the media type of a Content-Type value in lower case,
// as mime.ParseMediaType does, or "" when the type itself is malformed. The
// parameters are not parsed: a JSON body is JSON to a reader that ignores
// them, as JSON-RPC servers do, so a malformed or repeated parameter must
// not make the edge skip reading a request body, or checking a response,
// that the other side reads as JSON. Unlike mime.ParseMediaType it
// allocates nothing for the usual values: it runs several times per request.
func MediaType(ct string) string {
	base, _, _ := strings.Cut(ct, ";")
	for i := range len(base) {
		if base[i] >= utf8.RuneSelf {
			// Unicode spaces and letters (U+0130 lowers to i): mime's way.
			mt, _, err := mime.ParseMediaType(base)
			if err != nil {
				return ""
			}
			return mt
		}
	}
	base = strings.ToLower(strings.TrimSpace(base))
	typ, sub, slash := strings.Cut(base, "/")
	if !isToken(typ) || slash && !isToken(sub) {
		return ""
	}
	return base
}

// isToken reports whether s is an RFC 2045 token: one or more ASCII
// characters other than controls, space and tspecials.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := range len(s) {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`()<>@,;:\"/[]?=`, c) >= 0 {
			return false
		}
	}
	return true
}

// ReadBody reads the whole body of r, up to max bytes (ErrBodyTooLarge),
// and puts an identical copy back on r; a body that cannot be read is
// ErrBodyRead. w, when not nil, is r's: a body of unknown length is read
// through http.MaxBytesReader, which has the server close the connection
// instead of reading the rest of an oversized body.
func ReadBody(w http.ResponseWriter, r *http.Request, max int64) ([]byte, error) {
	if r.ContentLength > max {
		return nil, ErrBodyTooLarge
	}
	rd := r.Body
	if r.ContentLength < 0 {
		// Unknown length. A known length is within max, and net/http
		// reads no further.
		rd = http.MaxBytesReader(w, r.Body, max)
	}
	body, err := readAll(rd, r.ContentLength, max)
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok || err == ErrBodyTooLarge {
			return nil, ErrBodyTooLarge
		}
		return nil, ErrBodyRead
	}
	r.Body = newMemBody(body)
	return body, nil
}

// readAll is io.ReadAll with a first buffer of the announced size (-1 when
// unknown), so that a body of known length is read into one allocation of
// its size, and a limit: more than max bytes is ErrBodyTooLarge. Only up to
// maxPrealloc is taken on trust: a client announcing a large body and
// sending nothing must not cost the edge that much memory.
func readAll(rd io.Reader, size, max int64) ([]byte, error) {
	if size < 0 {
		size = 512 // io.ReadAll's first buffer
	}
	b := make([]byte, 0, min(size, maxPrealloc)+1) // +1: the read that meets EOF needs room
	for {
		n, err := rd.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if int64(len(b)) > max {
			return nil, ErrBodyTooLarge
		}
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
		if len(b) == cap(b) { // longer than announced
			b = append(b, 0)[:len(b)]
		}
	}
}

// maxPrealloc bounds the buffer readAll allocates before the bytes arrive.
const maxPrealloc = 64 << 10

// memBody is a request body held in memory: io.NopCloser(bytes.NewReader(b))
// in one allocation.
type memBody struct{ bytes.Reader }

func newMemBody(b []byte) *memBody {
	m := new(memBody)
	m.Reset(b)
	return m
}

func (*memBody) Close() error { return nil }

// SetBody replaces the body of r with b, and its length with b's.
func SetBody(r *http.Request, b []byte) {
	r.Body = newMemBody(b)
	r.ContentLength = int64(len(b))
	r.TransferEncoding = nil
	r.Header.Set("Content-Length", strconv.Itoa(len(b)))
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
}
