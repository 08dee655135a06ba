package authserver

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"sync"
	"time"
)

// Client ID Metadata Documents: a client_id that is an https URL names a
// JSON document the client publishes there, fetched through the SSRF-guarded
// client (a URL on a loopback or private address is refused), within a
// time and size bound, and cached, with a bound on entries.
const (
	cimdTimeout    = 5 * time.Second
	cimdMaxSize    = 16 << 10
	cimdTTL        = 5 * time.Minute
	cimdMaxEntries = 256
	cimdMaxURLLen  = 1024
)

var errCIMD = errors.New("the client's metadata document (client_id URL) could not be fetched or is invalid: it must be https on a public address, answer 200 with a JSON object of at most 16 KiB whose client_id is its own URL, and list valid redirect_uris")

type cimdEntry struct {
	c       client
	expires time.Time
}

type cimdCache struct {
	http *http.Client
	mu   sync.Mutex
	m    map[string]cimdEntry
}

func newCIMDCache(c *http.Client) *cimdCache {
	return &cimdCache{http: c, m: make(map[string]cimdEntry)}
}

type cimdDoc struct {
	ClientID     string   `json:"client_id"`
	ClientName   string   `json:"client_name"`
	RedirectURIs []string `json:"redirect_uris"`
	AuthMethod   string   `json:"token_endpoint_auth_method"`
}

func (c *cimdCache) get(ctx context.Context, id string) (client, error) {
	if c.http == nil {
		return client{}, errBadClient
	}
	u, err := url.Parse(id)
	if err != nil || len(id) > cimdMaxURLLen || u.Scheme != "https" || u.Host == "" || u.User != nil || u.Fragment != "" || u.Path == "" || u.Path == "/" {
		return client{}, errCIMD
	}
	now := time.Now()
	c.mu.Lock()
	e, ok := c.m[id]
	c.mu.Unlock()
	if ok && now.Before(e.expires) {
		return e.c, nil
	}
	cl, err := c.fetch(ctx, id)
	if err != nil {
		return client{}, err
	}
	c.mu.Lock()
	if len(c.m) >= cimdMaxEntries {
		for k, v := range c.m {
			if !now.Before(v.expires) {
				delete(c.m, k)
			}
		}
		if len(c.m) >= cimdMaxEntries {
			c.m = make(map[string]cimdEntry, cimdMaxEntries)
		}
	}
	c.m[id] = cimdEntry{c: cl, expires: now.Add(cimdTTL)}
	c.mu.Unlock()
	return cl, nil
}

func (c *cimdCache) fetch(ctx context.Context, id string) (client, error) {
	ctx, cancel := context.WithTimeout(ctx, cimdTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, id, nil)
	if err != nil {
		return client{}, errCIMD
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return client{}, errCIMD
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return client{}, errCIMD
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, cimdMaxSize+1))
	if err != nil || len(body) > cimdMaxSize {
		return client{}, errCIMD
	}
	var doc cimdDoc
	if readStrict(body, &doc, "client_id", "client_name", "redirect_uris", "token_endpoint_auth_method") != nil || doc.ClientID != id {
		return client{}, errCIMD
	}
	req2 := registerRequest{RedirectURIs: doc.RedirectURIs, ClientName: doc.ClientName, TokenEndpointAuthMethod: doc.AuthMethod}
	if checkRegistration(&req2) != "" {
		return client{}, errCIMD
	}
	return client{ID: id, Name: doc.ClientName, RedirectURIs: doc.RedirectURIs, Metadata: true}, nil
}
