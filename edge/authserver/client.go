package authserver

import (
	"context"
	"crypto/hmac"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net"
	"net/url"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// A registered client is not stored anywhere: its client_id is the
// registration itself, MACed with a key every replica shares. An
// unauthenticated request (registration is one) then never writes shared
// state, and every replica knows every client.

// Limits of a registration; they bound a client_id to about 4 KiB.
const (
	maxRedirectURIs   = 5
	maxRedirectURILen = 512
	maxClientNameLen  = 100
	clientIDPrefix    = "mcpi-c1."
)

// client is what the server knows of a client.
type client struct {
	ID           string
	Name         string
	RedirectURIs []string
	// Metadata: a Client ID Metadata Document (the id is its URL).
	Metadata bool
}

// registration is the MACed content of a client_id.
type registration struct {
	RedirectURIs []string `json:"r"`
	Name         string   `json:"n,omitempty"`
	IssuedAt     int64    `json:"t"`
	// Nonce makes two registrations with the same content two clients.
	Nonce string `json:"x"`
}

var (
	errBadClient   = errors.New("unknown or invalid client_id")
	errBadRedirect = errors.New("redirect_uri must be https, or http on a loopback address (127.0.0.1, [::1], localhost), without a fragment or user info, at most 512 bytes")
)

// newClientID encodes reg as a client_id.
func (s *Server) newClientID(reg registration) string {
	b, _ := json.Marshal(reg)
	payload := base64.RawURLEncoding.EncodeToString(b)
	sum := mac(s.secrets.client, payload)
	return clientIDPrefix + payload + "." + base64.RawURLEncoding.EncodeToString(sum)
}

// parseClientID checks id's MAC and decodes the registration in it.
func (s *Server) parseClientID(id string) (client, error) {
	rest, ok := strings.CutPrefix(id, clientIDPrefix)
	if !ok || len(id) > 8<<10 {
		return client{}, errBadClient
	}
	payload, sig, ok := strings.Cut(rest, ".")
	if !ok {
		return client{}, errBadClient
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || !hmac.Equal(got, mac(s.secrets.client, payload)) {
		return client{}, errBadClient
	}
	raw, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil {
		return client{}, errBadClient
	}
	var reg registration
	if err := readStrict(raw, &reg, "r", "n", "t", "x"); err != nil {
		return client{}, errBadClient
	}
	return client{ID: id, Name: reg.Name, RedirectURIs: reg.RedirectURIs}, nil
}

// lookupClient finds the client of id: a registration, or a Client ID
// Metadata Document when id is an https URL.
func (s *Server) lookupClient(ctx context.Context, id string) (client, error) {
	if strings.HasPrefix(id, "https://") {
		return s.clients.get(ctx, id)
	}
	return s.parseClientID(id)
}

// checkRedirectURI reports whether u may be registered as a redirect URI.
func checkRedirectURI(u string) error {
	if len(u) == 0 || len(u) > maxRedirectURILen || strings.ContainsAny(u, "#\\ \t\r\n") {
		return errBadRedirect
	}
	p, err := url.Parse(u)
	if err != nil || p.User != nil || p.Fragment != "" || p.Opaque != "" || p.Host == "" {
		return errBadRedirect
	}
	switch p.Scheme {
	case "https":
		return nil
	case "http":
		if isLoopback(p.Hostname()) {
			return nil
		}
	}
	return errBadRedirect
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// checkClientName accepts a short name of printable characters.
func checkClientName(n string) error {
	if len(n) > maxClientNameLen || !utf8.ValidString(n) {
		return errors.New("client_name must be valid UTF-8, at most 100 bytes")
	}
	for _, c := range n {
		if !unicode.IsPrint(c) {
			return errors.New("client_name must hold printable characters only")
		}
	}
	return nil
}

// redirectAllowed reports whether u is exactly one of c's redirect URIs.
func (c client) redirectAllowed(u string) bool {
	for _, r := range c.RedirectURIs {
		if r == u {
			return true
		}
	}
	return false
}

// registrationAt is a registration of redirects and name made at now.
func registrationAt(redirects []string, name string, now time.Time) registration {
	return registration{RedirectURIs: redirects, Name: name, IssuedAt: now.Unix(), Nonce: randomToken()[:16]}
}
