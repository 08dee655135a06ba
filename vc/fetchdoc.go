package vc

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/didresolver"
)

// docFetch describes one kind of document the verifier fetches over
// HTTPS (status lists, parent credentials): the client (with the SSRF
// guard), the bounds, and how its failures are reported.
type docFetch struct {
	client  *http.Client
	accept  string
	timeout time.Duration
	maxSize int64
	// kind is the sentinel every failure of the fetch wraps; what names
	// the document in the failures' details.
	kind error
	what string
}

// get fetches u: a 2xx answer of at most maxSize bytes, read within
// timeout; a redirect is refused, not followed. It returns the body and
// its Content-Type. A URL that does not make a request is reported as
// errFetchURL, for the caller to classify.
func (f docFetch) get(ctx context.Context, u string) (body []byte, contentType string, err error) {
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, "", errFetchURL
	}
	req.Header.Set("Accept", f.accept)
	resp, err := f.client.Do(req)
	if err != nil {
		var cause error
		switch {
		case errors.Is(err, didresolver.ErrForbiddenAddress):
			cause = didresolver.ErrForbiddenAddress
		case ctx.Err() != nil:
			cause = ctx.Err()
		}
		return nil, "", &verifyError{kind: f.kind, detail: "fetching the " + f.what + " failed", cause: cause}
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode >= 300 && resp.StatusCode <= 399:
		return nil, "", fail(f.kind, f.what+": redirect refused")
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		return nil, "", fail(f.kind, f.what+": HTTP status "+strconv.Itoa(resp.StatusCode))
	case resp.ContentLength > f.maxSize:
		return nil, "", fail(f.kind, f.what+" too large")
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, f.maxSize+1))
	if err != nil {
		return nil, "", &verifyError{kind: f.kind, detail: "reading the " + f.what + " failed", cause: ctx.Err()}
	}
	if int64(len(b)) > f.maxSize {
		return nil, "", fail(f.kind, f.what+" too large")
	}
	return b, resp.Header.Get("Content-Type"), nil
}

// errFetchURL: a URL that cannot be fetched at all.
var errFetchURL = errors.New("vc: URL cannot be fetched")
