// Package reply writes the edge's own JSON answers: its documents and its
// refusals share the headers every such answer needs.
package reply

import "net/http"

// JSON writes body as the complete answer, with nosniff and, when given,
// Cache-Control. A write error means the client left; there is nothing
// to do about it.
func JSON(w http.ResponseWriter, status int, body []byte, cacheControl string) {
	hdr := w.Header()
	hdr.Set("Content-Type", "application/json")
	hdr.Set("X-Content-Type-Options", "nosniff")
	if cacheControl != "" {
		hdr.Set("Cache-Control", cacheControl)
	}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// VaryHost marks a cacheable answer whose body is derived from the Host:
// a shared cache must not serve one Host's document (its DID, its resource
// URL) to a request for another.
func VaryHost(w http.ResponseWriter) { w.Header().Add("Vary", "Host") }
