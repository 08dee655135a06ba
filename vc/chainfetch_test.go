package vc

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/didresolver"
)

// Tests of chainfetch.go: parents fetched from the URL their child names.

const credsHost = "creds.example.com"

func credsURL(path string) string { return "https://" + credsHost + path }

// served is one answer of a parentServer.
type served struct {
	body        []byte
	contentType string // default application/vc+ld+json, "-" for none
	code        int    // default 200
	location    string // for a redirect
	chunked     bool   // no Content-Length
}

// parentServer serves parent credentials over TLS with a certificate for
// credsHost; its client dials it for every host, so credentials can name
// https://creds.example.com/… .
type parentServer struct {
	srv   *httptest.Server
	roots *tls.Config
	mu    sync.Mutex
	paths map[string]served
	hits  map[string]int
	delay time.Duration
}

func newParentServer(t testing.TB) *parentServer {
	t.Helper()
	cert, roots := selfSigned(t, credsHost)
	s := &parentServer{roots: &tls.Config{RootCAs: roots}, paths: map[string]served{}, hits: map[string]int{}}
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	s.srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	s.srv.StartTLS()
	t.Cleanup(s.srv.Close)
	return s
}

func (s *parentServer) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.hits[r.URL.Path]++
	a, ok := s.paths[r.URL.Path]
	delay := s.delay
	s.mu.Unlock()
	if delay > 0 {
		time.Sleep(delay)
	}
	if !ok {
		http.NotFound(w, r)
		return
	}
	switch ct := a.contentType; ct {
	case "":
		w.Header().Set("Content-Type", "application/vc+ld+json")
	case "-":
		w.Header()["Content-Type"] = nil // no sniffing either
	default:
		w.Header().Set("Content-Type", ct)
	}
	if a.location != "" {
		w.Header().Set("Location", a.location)
	}
	if a.code != 0 {
		w.WriteHeader(a.code)
	}
	if a.chunked {
		for i := 0; i < len(a.body); i += 1024 {
			_, _ = w.Write(a.body[i:min(i+1024, len(a.body))])
			w.(http.Flusher).Flush()
		}
		return
	}
	_, _ = w.Write(a.body)
}

func (s *parentServer) set(path string, a served) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.paths[path] = a
}

func (s *parentServer) hitCount(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hits[path]
}

func (s *parentServer) setDelay(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.delay = d
}

// client trusts the server's certificate and connects to it whatever the
// URL's host.
func (s *parentServer) client() *http.Client {
	addr := s.srv.Listener.Addr().String()
	var d net.Dialer
	return &http.Client{Transport: &http.Transport{
		TLSClientConfig: s.roots,
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return d.DialContext(ctx, network, addr)
		},
	}}
}

// fetchOpt turns fetching on from s, allowing https://creds.example.com/c/.
func (s *parentServer) fetchOpt(mod func(*ChainFetch)) Option {
	cfg := ChainFetch{Allow: []string{credsURL("/c/")}, Client: s.client(), AllowPrivate: true}
	if mod != nil {
		mod(&cfg)
	}
	return WithChainFetch(cfg)
}

// urlChain is chain3 with the parents named by URL: the leaf names the
// middle by delegation.parentCredentialUrl (/c/mid), the middle names the
// root by an https parentId (/c/root), which is the root's delegation id.
func (f *fixture) urlChain(t testing.TB, tweak func(i int, c map[string]any)) *chain3 {
	t.Helper()
	return f.chain3(t, func(i int, c map[string]any) {
		switch i {
		case 0:
			setPath(c, "credentialSubject.delegation.id", credsURL("/c/root"))
		case 1:
			setPath(c, "credentialSubject.delegation.parentId", credsURL("/c/root"))
		case 2:
			setPath(c, "credentialSubject.delegation.parentCredentialUrl", credsURL("/c/mid"))
		}
		if tweak != nil {
			tweak(i, c)
		}
	})
}

// TestChainFetch has one row per outcome of fetching parents; the chain is
// user → mid → mid2 → agent, and only the user (the root issuer) is
// trusted unless a row says otherwise.
func TestChainFetch(t *testing.T) {
	f := newFixture(t)
	aud := ForAudience(serverDID)
	ctx := context.Background()

	type input struct {
		leaf      []byte
		ancestors [][]byte
		opts      []Option // after WithTrustedIssuers(f.ed.did) and the fetch option
		fetch     func(*ChainFetch)
		noFetch   bool
		paths     map[string]served
	}
	serveChain := func(ch *chain3) map[string]served {
		return map[string]served{"/c/root": {body: ch.root}, "/c/mid": {body: ch.middle}}
	}
	tests := []struct {
		name   string
		in     func(t *testing.T) input
		want   error
		reason string
		detail string
		hits   map[string]int // expected fetches per path, when given
		check  func(t *testing.T, d *Delegation)
	}{
		{name: "ok both parents fetched", in: func(t *testing.T) input {
			ch := f.urlChain(t, nil)
			return input{leaf: ch.leaf, paths: serveChain(ch)}
		}, hits: map[string]int{"/c/mid": 1, "/c/root": 1}, check: func(t *testing.T, d *Delegation) {
			want := []string{"urn:uuid:d-root", "urn:uuid:d-mid", "urn:uuid:d-leaf"}
			if !equalStrings(d.Chain, want) || d.UserDID != f.ed.did || !equalStrings(d.Scopes, []string{"a"}) {
				t.Errorf("Chain %q user %q scopes %q", d.Chain, d.UserDID, d.Scopes)
			}
		}},
		{name: "ok middle given, root fetched", in: func(t *testing.T) input {
			ch := f.urlChain(t, nil)
			return input{leaf: ch.leaf, ancestors: [][]byte{ch.middle}, paths: map[string]served{"/c/root": {body: ch.root}}}
		}, hits: map[string]int{"/c/mid": 0, "/c/root": 1}},
		{name: "ok in a presentation", in: func(t *testing.T) input {
			ch := f.urlChain(t, nil)
			vp := vpJWT(t, f.agent, [][]byte{ch.leaf}, func(c map[string]any) { delete(c, "nonce") })
			return input{leaf: vp, paths: serveChain(ch)}
		}, check: func(t *testing.T, d *Delegation) {
			if len(d.Chain) != 3 || !d.Presented {
				t.Errorf("Chain %q presented %v", d.Chain, d.Presented)
			}
		}},
		{name: "ok VC-JWT parent as application/vc+jwt", in: func(t *testing.T) input {
			ch := f.urlChain(t, nil)
			p := serveChain(ch)
			p["/c/mid"] = served{body: f.jwtOf(t, ch, 1), contentType: "application/vc+jwt"}
			return input{leaf: ch.leaf, paths: p}
		}},
		{name: "ok VC-JWT parent as a JSON string, no Content-Type", in: func(t *testing.T) input {
			ch := f.urlChain(t, nil)
			p := serveChain(ch)
			s, _ := json.Marshal(string(f.jwtOf(t, ch, 1)))
			p["/c/mid"] = served{body: s, contentType: "-"}
			return input{leaf: ch.leaf, paths: p}
		}},
		{name: "ok fragment dropped, large body sent in chunks", in: func(t *testing.T) input {
			ch := f.urlChain(t, func(i int, c map[string]any) {
				if i == 2 {
					setPath(c, "credentialSubject.delegation.parentCredentialUrl", credsURL("/c/mid#frag"))
				}
			})
			p := serveChain(ch)
			p["/c/mid"] = served{body: ch.middle, chunked: true}
			return input{leaf: ch.leaf, paths: p}
		}},
		{name: "ok issuer trusted directly: nothing fetched", in: func(t *testing.T) input {
			ch := f.urlChain(t, nil)
			return input{leaf: ch.leaf, paths: serveChain(ch), opts: []Option{WithTrustedIssuers(ch.mid2.did)}}
		}, hits: map[string]int{"/c/mid": 0, "/c/root": 0}},
		{name: "ok fetching stops at a directly trusted issuer", in: func(t *testing.T) input {
			ch := f.urlChain(t, nil)
			return input{leaf: ch.leaf, paths: serveChain(ch), opts: []Option{WithTrustedIssuers(ch.mid.did)}}
		}, hits: map[string]int{"/c/mid": 1, "/c/root": 0}, check: func(t *testing.T, d *Delegation) {
			if len(d.Chain) != 2 || d.Chain[0] != "urn:uuid:d-mid" || d.UserDID == f.ed.did {
				t.Errorf("Chain %q user %q", d.Chain, d.UserDID)
			}
		}},
		{name: "ok any issuer trusted: nothing fetched", in: func(t *testing.T) input {
			ch := f.urlChain(t, nil)
			return input{leaf: ch.leaf, paths: serveChain(ch), opts: []Option{WithTrustedIssuers(AnyIssuer)}}
		}, hits: map[string]int{"/c/mid": 0}},

		{name: "fetch off", in: func(t *testing.T) input {
			ch := f.urlChain(t, nil)
			return input{leaf: ch.leaf, paths: serveChain(ch), noFetch: true}
		}, want: ErrChainIncomplete, reason: "chain_incomplete", hits: map[string]int{"/c/mid": 0}},
		{name: "no URL named", in: func(t *testing.T) input {
			ch := f.chain3(t, nil)
			return input{leaf: ch.leaf, paths: serveChain(ch)}
		}, want: ErrChainIncomplete, reason: "chain_incomplete"},
		{name: "404", in: func(t *testing.T) input {
			ch := f.urlChain(t, nil)
			return input{leaf: ch.leaf, paths: map[string]served{"/c/root": {body: ch.root}}}
		}, want: ErrChainFetch, reason: "chain_fetch_failed", detail: "HTTP status 404"},
		{name: "server error", in: func(t *testing.T) input {
			ch := f.urlChain(t, nil)
			return input{leaf: ch.leaf, paths: map[string]served{"/c/mid": {code: http.StatusServiceUnavailable}}}
		}, want: ErrChainFetch, reason: "chain_fetch_failed", detail: "HTTP status 503"},
		{name: "oversize", in: func(t *testing.T) input {
			ch := f.urlChain(t, nil)
			return input{leaf: ch.leaf, paths: serveChain(ch), fetch: func(c *ChainFetch) { c.MaxSize = 256 }}
		}, want: ErrChainFetch, reason: "chain_fetch_failed", detail: "too large"},
		{name: "oversize without Content-Length", in: func(t *testing.T) input {
			ch := f.urlChain(t, nil)
			return input{leaf: ch.leaf, paths: map[string]served{"/c/mid": {body: ch.middle, chunked: true}},
				fetch: func(c *ChainFetch) { c.MaxSize = 256 }}
		}, want: ErrChainFetch, reason: "chain_fetch_failed", detail: "too large"},
		{name: "redirect refused", in: func(t *testing.T) input {
			ch := f.urlChain(t, nil)
			p := serveChain(ch)
			p["/c/mid"] = served{code: http.StatusFound, location: credsURL("/c/elsewhere")}
			p["/c/elsewhere"] = served{body: ch.middle}
			return input{leaf: ch.leaf, paths: p}
		}, want: ErrChainFetch, reason: "chain_fetch_failed", detail: "redirect", hits: map[string]int{"/c/elsewhere": 0}},
		{name: "HTML page", in: func(t *testing.T) input {
			ch := f.urlChain(t, nil)
			return input{leaf: ch.leaf, paths: map[string]served{"/c/mid": {body: []byte("<html></html>"), contentType: "text/html"}}}
		}, want: ErrChainFetch, reason: "chain_fetch_failed", detail: "media type"},
		{name: "not https", in: func(t *testing.T) input {
			ch := f.urlChain(t, func(i int, c map[string]any) {
				if i == 2 {
					setPath(c, "credentialSubject.delegation.parentCredentialUrl", "http://"+credsHost+"/c/mid")
				}
			})
			return input{leaf: ch.leaf, paths: serveChain(ch)}
		}, want: ErrChainIncomplete, reason: "chain_incomplete", detail: "not allowed", hits: map[string]int{"/c/mid": 0}},
		{name: "host not on the allow-list", in: func(t *testing.T) input {
			ch := f.urlChain(t, func(i int, c map[string]any) {
				if i == 2 {
					setPath(c, "credentialSubject.delegation.parentCredentialUrl", "https://evil.example.com/c/mid")
				}
			})
			return input{leaf: ch.leaf, paths: serveChain(ch)}
		}, want: ErrChainIncomplete, reason: "chain_incomplete", detail: "not allowed", hits: map[string]int{"/c/mid": 0}},
		{name: "path outside the prefix", in: func(t *testing.T) input {
			ch := f.urlChain(t, func(i int, c map[string]any) {
				if i == 2 {
					setPath(c, "credentialSubject.delegation.parentCredentialUrl", credsURL("/c/../admin/mid"))
				}
			})
			return input{leaf: ch.leaf, paths: serveChain(ch)}
		}, want: ErrChainIncomplete, reason: "chain_incomplete", detail: "not allowed"},
		{name: "private address refused by the guard", in: func(t *testing.T) input {
			ch := f.urlChain(t, nil)
			return input{leaf: ch.leaf, paths: serveChain(ch), fetch: func(c *ChainFetch) { c.AllowPrivate = false }}
		}, want: ErrChainFetch, reason: "chain_fetch_failed", detail: "fetching", hits: map[string]int{"/c/mid": 0}},
		{name: "cycle: a parent naming its own URL", in: func(t *testing.T) input {
			ch := f.urlChain(t, func(i int, c map[string]any) {
				if i == 1 {
					setPath(c, "credentialSubject.delegation.parentId", "d-root")
					setPath(c, "credentialSubject.delegation.parentCredentialUrl", credsURL("/c/mid"))
				}
			})
			return input{leaf: ch.leaf, paths: serveChain(ch)}
		}, want: ErrChain, reason: "bad_chain", detail: "cycle", hits: map[string]int{"/c/mid": 1}},
		{name: "cycle: two credentials naming each other", in: func(t *testing.T) input {
			ch := f.urlChain(t, nil)
			// mid2's parent names mid2's own credential back.
			loop := f.delegationVC(ch.mid, ch.mid2.did, "d-mid", "d-leaf", "a", "b")
			setPath(loop, "credentialSubject.delegation.parentCredentialUrl", credsURL("/c/leaf"))
			return input{leaf: ch.leaf, paths: map[string]served{
				"/c/mid": {body: signCred(t, ch.mid, loop, false)}, "/c/leaf": {body: ch.leaf, contentType: "application/vc+jwt"},
			}}
		}, want: ErrChain, reason: "bad_chain", detail: "cycle"},
		{name: "fetched parent with a bad signature", in: func(t *testing.T) input {
			ch := f.urlChain(t, nil)
			m := decodeJSON(t, ch.middle)
			setPath(m, "credentialSubject.delegation.scopes", []any{"a", "b", "c"})
			p := serveChain(ch)
			p["/c/mid"] = served{body: mustJSON(t, m)}
			return input{leaf: ch.leaf, paths: p}
		}, want: ErrSignature, reason: "bad_signature"},
		{name: "leaf wider than its fetched parent", in: func(t *testing.T) input {
			ch := f.urlChain(t, func(i int, c map[string]any) {
				if i == 2 {
					setPath(c, "credentialSubject.delegation.scopes", []any{"a", "c"})
					setPath(c, "credentialSubject.delegation.constraints.scopes", []any{"a", "c"})
				}
			})
			return input{leaf: ch.leaf, paths: serveChain(ch)}
		}, want: ErrChain, reason: "bad_chain", detail: "scopes widen"},
		{name: "fetched credential is not the parent named", in: func(t *testing.T) input {
			ch := f.urlChain(t, nil)
			return input{leaf: ch.leaf, paths: map[string]served{"/c/mid": {body: ch.root}}}
		}, want: ErrChain, reason: "bad_chain", detail: "not the parent named"},
		{name: "fetched root not trusted", in: func(t *testing.T) input {
			ch := f.urlChain(t, nil)
			return input{leaf: ch.leaf, paths: serveChain(ch), opts: []Option{WithTrustedIssuers(f.p256.did)}}
		}, want: ErrUntrustedIssuer, reason: "untrusted_issuer"},
		{name: "fetched parent expired", in: func(t *testing.T) input {
			ch := f.urlChain(t, func(i int, c map[string]any) {
				if i == 0 {
					c["expirationDate"] = fixedNow.Add(-time.Hour).Format(time.RFC3339)
				}
			})
			return input{leaf: ch.leaf, paths: serveChain(ch)}
		}, want: ErrExpired, reason: "expired"},
		{name: "fetched parent without an end", in: func(t *testing.T) input {
			ch := f.urlChain(t, func(i int, c map[string]any) {
				if i == 0 {
					delete(c, "expirationDate")
				}
			})
			return input{leaf: ch.leaf, paths: serveChain(ch)}
		}, want: ErrNoExpiry, reason: "no_expiry", detail: "ancestor credential"},
		{name: "presentation served", in: func(t *testing.T) input {
			ch := f.urlChain(t, nil)
			return input{leaf: ch.leaf, paths: map[string]served{"/c/mid": {body: vpJWT(t, ch.mid2, [][]byte{ch.middle}, nil), contentType: "application/jwt"}}}
		}, want: ErrMalformed, reason: "malformed", detail: "fetched"},
		{name: "depth: no fetch past the limit", in: func(t *testing.T) input {
			ch := f.urlChain(t, nil)
			return input{leaf: ch.leaf, paths: serveChain(ch), opts: []Option{WithMaxChainDepth(2)}}
		}, want: ErrChain, reason: "bad_chain", detail: "deeper", hits: map[string]int{"/c/mid": 1, "/c/root": 0}},
	}

	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.in(t)
			srv := newParentServer(t)
			for p, a := range in.paths {
				srv.set(p, a)
			}
			opts := []Option{WithTrustedIssuers(f.ed.did)}
			if !in.noFetch {
				opts = append(opts, srv.fetchOpt(in.fetch))
			}
			d, err := f.verifier(append(opts, in.opts...)...).Verify(ctx, in.leaf, aud, WithAncestors(in.ancestors...))
			for p, n := range tc.hits {
				if got := srv.hitCount(p); got != n {
					t.Errorf("%s fetched %d times, want %d", p, got, n)
				}
			}
			expectOutcome(t, d, err, tc.want, tc.reason, tc.detail, tc.check)
			if err != nil && (strings.Contains(err.Error(), credsHost) || strings.Contains(err.Error(), "/c/")) {
				t.Errorf("error %q quotes the URL", err)
			}
		})
	}
}

// jwtOf is link i of ch (0 root, 1 middle) as a VC-JWT instead of a JSON
// credential, signed again by its issuer.
func (f *fixture) jwtOf(t testing.TB, ch *chain3, i int) []byte {
	t.Helper()
	iss, raw := ch.user, ch.root
	if i == 1 {
		iss, raw = ch.mid, ch.middle
	}
	c := decodeJSON(t, raw)
	delete(c, "proof")
	return signCred(t, iss, c, true)
}

// TestChainFetchCache: a fetched parent is reused for the cache TTL and
// fetched again after it; a failure is remembered for 5s; verification is
// never skipped (a parent whose issuer key is gone fails from the cache).
func TestChainFetchCache(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	ch := f.urlChain(t, nil)
	srv := newParentServer(t)
	srv.set("/c/root", served{body: ch.root})
	srv.set("/c/mid", served{body: ch.middle})
	clock := &testClock{t: fixedNow}
	v := NewVerifier(f.res, WithClock(clock.now), WithTrustedIssuers(f.ed.did),
		srv.fetchOpt(func(c *ChainFetch) { c.CacheTTL = time.Minute }))
	verify := func() error {
		_, err := v.Verify(ctx, ch.leaf, ForAudience(serverDID))
		return err
	}

	for range 3 {
		if err := verify(); err != nil {
			t.Fatal(err)
		}
	}
	if n := srv.hitCount("/c/mid"); n != 1 {
		t.Fatalf("fetched %d times within the TTL", n)
	}
	clock.add(61 * time.Second)
	if err := verify(); err != nil {
		t.Fatal(err)
	}
	if n := srv.hitCount("/c/mid"); n != 2 {
		t.Fatalf("fetched %d times after the TTL", n)
	}

	// Cached, yet verified: with mid's key gone the cached middle fails.
	saved := f.res[ch.mid.did]
	delete(f.res, ch.mid.did)
	if err := verify(); !errors.Is(err, ErrIssuerUnresolved) {
		t.Fatalf("cached parent of an unresolvable issuer: %v", err)
	}
	f.res[ch.mid.did] = saved

	// Failures: remembered for 5s, then asked again.
	srv.set("/c/mid", served{code: http.StatusInternalServerError})
	clock.add(61 * time.Second)
	for range 2 {
		if err := verify(); !errors.Is(err, ErrChainFetch) {
			t.Fatalf("server error: %v", err)
		}
	}
	if n := srv.hitCount("/c/mid"); n != 3 {
		t.Fatalf("fetched %d times; the failure was not remembered", n)
	}
	srv.set("/c/mid", served{body: ch.middle})
	clock.add(6 * time.Second)
	if err := verify(); err != nil {
		t.Fatalf("after the negative TTL: %v", err)
	}
	if n := srv.hitCount("/c/mid"); n != 4 {
		t.Fatalf("fetched %d times", n)
	}
}

// TestChainFetchSingleFlight: concurrent verifications of a leaf whose
// parent is being fetched share one fetch; a caller that gives up gets
// ErrChainFetch with its context's error.
func TestChainFetchSingleFlight(t *testing.T) {
	f := newFixture(t)
	ch := f.urlChain(t, nil)
	srv := newParentServer(t)
	srv.set("/c/root", served{body: ch.root})
	srv.set("/c/mid", served{body: ch.middle})
	srv.setDelay(200 * time.Millisecond)
	v := f.verifier(WithTrustedIssuers(f.ed.did), srv.fetchOpt(nil))

	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() {
			_, errs[i] = v.Verify(context.Background(), ch.leaf, ForAudience(serverDID))
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if a, b := srv.hitCount("/c/mid"), srv.hitCount("/c/root"); a != 1 || b != 1 {
		t.Fatalf("fetched mid %d, root %d times", a, b)
	}

	other := f.urlChain(t, func(i int, c map[string]any) {
		if i == 2 {
			setPath(c, "credentialSubject.delegation.parentCredentialUrl", credsURL("/c/slow"))
		}
	})
	srv.set("/c/slow", served{body: ch.middle})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err := v.Verify(ctx, other.leaf, ForAudience(serverDID))
	if !errors.Is(err, ErrChainFetch) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("abandoned fetch: %v", err)
	}
}

// TestChainFetchTimeout: a server slower than the timeout fails the
// fetch.
func TestChainFetchTimeout(t *testing.T) {
	f := newFixture(t)
	ch := f.urlChain(t, nil)
	srv := newParentServer(t)
	srv.set("/c/mid", served{body: ch.middle})
	srv.setDelay(300 * time.Millisecond)
	v := f.verifier(WithTrustedIssuers(f.ed.did), srv.fetchOpt(func(c *ChainFetch) { c.Timeout = 50 * time.Millisecond }))
	_, err := v.Verify(context.Background(), ch.leaf, ForAudience(serverDID))
	if !errors.Is(err, ErrChainFetch) || Reason(err) != "chain_fetch_failed" {
		t.Fatalf("slow server: %v", err)
	}
}

// TestChainFetchUnguardable: a client the SSRF guard cannot wrap fails
// every fetch closed.
func TestChainFetchUnguardable(t *testing.T) {
	f := newFixture(t)
	ch := f.urlChain(t, nil)
	odd := &http.Client{Transport: roundTripFunc(func(*http.Request) (*http.Response, error) {
		t.Error("the unguarded transport was used")
		return nil, errors.New("unreachable")
	})}
	v := f.verifier(WithTrustedIssuers(f.ed.did), WithChainFetch(ChainFetch{Allow: []string{credsURL("/c/")}, Client: odd}))
	_, err := v.Verify(context.Background(), ch.leaf, ForAudience(serverDID))
	if !errors.Is(err, ErrChainFetch) || !errors.Is(err, didresolver.ErrForbiddenAddress) {
		t.Fatalf("unguardable client: %v", err)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestChainFetchURLs: which URLs an allow-list lets through.
func TestChainFetchURLs(t *testing.T) {
	fc := newChainFetcher(NewVerifier(nil), ChainFetch{Allow: []string{
		"https://creds.example.com/c/", "https://Other.Example.com:8443/", "https://[2001:db8::1]/v/", "not a prefix",
	}})
	tests := map[string]string{ // URL → normalized, "" when refused
		"https://creds.example.com/c/mid":         "https://creds.example.com/c/mid",
		"https://CREDS.example.com:443/c/mid#x":   "https://CREDS.example.com:443/c/mid",
		"https://creds.example.com/c/mid?v=1":     "https://creds.example.com/c/mid?v=1",
		"https://creds.example.com/c/":            "https://creds.example.com/c/",
		"https://other.example.com:8443/any/path": "https://other.example.com:8443/any/path",
		"https://[2001:db8::1]/v/x":               "https://[2001:db8::1]/v/x",
		"https://creds.example.com/c":             "",
		"https://creds.example.com/cx/mid":        "",
		"https://creds.example.com/other":         "",
		"https://creds.example.com/c/../admin":    "",
		"https://creds.example.com/c/%2e%2e/x":    "",
		"https://creds.example.com/c/..%2Fadmin":  "", // ".." after decoding %2F
		"https://creds.example.com/c/.":           "",
		"https://creds.example.com/c/a\\..\\b":    "",
		"https://creds.example.com.evil.com/c/x":  "",
		"https://evil.com/c/x":                    "",
		"https://user@creds.example.com/c/x":      "",
		"http://creds.example.com/c/x":            "",
		"https://other.example.com/any":           "", // port 443, not 8443
		"https:creds.example.com/c/x":             "",
		"//creds.example.com/c/x":                 "",
		"https://creds.example.com/c/%zz":         "",
	}
	tests["https://creds.example.com/c/"+strings.Repeat("a", maxFetchURL)] = "" // too long
	for in, want := range tests {
		got, ok := fc.allowed(in)
		if ok != (want != "") || got != want {
			t.Errorf("allowed(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}

	for _, p := range []string{"https://a.example/", "https://a.example", "https://a.example:8443/x/y/"} {
		if err := CheckFetchPrefix(p); err != nil {
			t.Errorf("CheckFetchPrefix(%q): %v", p, err)
		}
	}
	for _, p := range []string{"http://a.example/", "https://a.example/x", "https://a.example/?q", "https://a.example/#f",
		"https://u@a.example/", "https:a", "/x/", "https://a.example/x/../", "https://a.example/x?/"} {
		if err := CheckFetchPrefix(p); err == nil {
			t.Errorf("CheckFetchPrefix(%q) accepted", p)
		}
	}
}

// TestChainFetchCacheBound: the cache holds at most maxFetchEntries URLs
// and evicts the least recently used.
func TestChainFetchCacheBound(t *testing.T) {
	fc := newChainFetcher(NewVerifier(nil, WithClock(func() time.Time { return fixedNow })), ChainFetch{})
	for i := range maxFetchEntries + 10 {
		fc.store(credsURL("/c/"+strings.Repeat("x", i%7)+string(rune('a'+i%26))+strings.Repeat("y", i/26)), []byte("b"), nil)
	}
	if n := fc.lru.Len(); n != maxFetchEntries || len(fc.entries) != n {
		t.Fatalf("%d entries (%d in the map)", n, len(fc.entries))
	}
	big := make([]byte, maxFetchCacheBytes/2+1)
	fc.store(credsURL("/c/big1"), big, nil)
	fc.store(credsURL("/c/big2"), big, nil)
	if fc.bytes > maxFetchCacheBytes || fc.cached(credsURL("/c/big1")) != nil || fc.cached(credsURL("/c/big2")) == nil {
		t.Fatalf("%d bytes cached", fc.bytes)
	}
}
