package didresolver

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// tlsServer starts an HTTPS test server. Its client (ts.Client()) dials the
// server for example.com and every *.example.com name, and trusts its
// certificate, which covers those names and 127.0.0.1.
func tlsServer(t *testing.T, h http.Handler) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var hits atomic.Int64
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		h.ServeHTTP(w, r)
	}))
	// Refused connections make the server log handshake errors.
	ts.Config.ErrorLog = log.New(io.Discard, "", 0)
	ts.StartTLS()
	t.Cleanup(ts.Close)
	return ts, &hits
}

func serveDoc(path, body string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != path {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/did+json")
		io.WriteString(w, body)
	})
}

func testResolver(ts *httptest.Server, opts ...Option) Resolver {
	return New(append([]Option{WithHTTPClient(ts.Client()), WithAllowPrivateAddresses(true)}, opts...)...)
}

func TestKyaOSDIDWebVectors(t *testing.T) {
	vf := loadVectors(t, "did-web-resolution.json")
	for _, v := range vf.Vectors {
		t.Run(v.ID, func(t *testing.T) {
			var h http.Handler = http.NotFoundHandler()
			if len(v.Input.DIDDocument) > 0 {
				h = serveDoc("/.well-known/did.json", string(v.Input.DIDDocument))
			}
			ts, hits := tlsServer(t, h)
			// The vector's own DID (agent.example.com) is dialled to the
			// test server by its client.
			doc, err := testResolver(ts).Resolve(context.Background(), v.Input.DID)
			checkOneSentinel(t, err)
			if hits.Load() != 1 {
				t.Fatalf("server saw %d requests", hits.Load())
			}
			switch {
			case v.Expected == "pass":
				if err != nil {
					t.Fatalf("resolve: %v", err)
				}
				keys := doc.Keys(AssertionMethod)
				if len(keys) != 1 || keys[0].ID != v.Input.DID+"#keys-1" {
					t.Fatalf("keys %+v", keys)
				}
				k, err := ResolveKey(context.Background(), testResolver(ts), v.Input.DID+"#keys-1", Authentication)
				if err != nil {
					t.Fatal(err)
				}
				x, _ := base64.RawURLEncoding.DecodeString("zIbzE7nNFfU0i62mv43FWCPYS4i5sS8-NeRy_O7ptW8")
				if !ed25519.PublicKey(x).Equal(k.Public) {
					t.Fatalf("key %v, want the vector's Ed25519 key", k.Public)
				}
			case strings.HasSuffix(v.ID, "id-mismatch"):
				wantErr(t, err, ErrIDMismatch)
			case strings.HasSuffix(v.ID, "not-found"):
				wantErr(t, err, ErrNotFound)
			default:
				t.Fatalf("no expectation for vector %s", v.ID)
			}
		})
	}
}

func TestWebURL(t *testing.T) {
	tests := []struct {
		did  string
		want string
		err  error
	}{
		{"did:web:example.com", "https://example.com/.well-known/did.json", nil},
		{"did:web:example.com%3A8443", "https://example.com:8443/.well-known/did.json", nil},
		{"did:web:example.com%3a8443", "https://example.com:8443/.well-known/did.json", nil},
		{"did:web:w3c-ccg.github.io:user:alice", "https://w3c-ccg.github.io/user/alice/did.json", nil},
		{"did:web:example.com%3A3000:user:alice", "https://example.com:3000/user/alice/did.json", nil},
		{"did:web:example.com:a%20b", "https://example.com/a%20b/did.json", nil},
		{"did:web:127.0.0.1%3A8080", "https://127.0.0.1:8080/.well-known/did.json", nil},
		{"did:web:example.com%3A", "", ErrInvalidDID},
		{"did:web:example.com%3A0", "", ErrInvalidDID},
		{"did:web:example.com%3A65536", "", ErrInvalidDID},
		{"did:web:example.com%3A08080", "", ErrInvalidDID},
		{"did:web:example.com%3A80%3A90", "", ErrInvalidDID},
		{"did:web:example.com%3Ahttp", "", ErrInvalidDID},
		{"did:web:user%40example.com", "", ErrInvalidDID},
		{"did:web:example.com%2Fpath", "", ErrInvalidDID},
		{"did:web:%5B%3A%3A1%5D", "", ErrInvalidDID},
		{"did:web:exa_mple.com", "", ErrInvalidDID},
		{"did:web:-example.com", "", ErrInvalidDID},
		{"did:web:example..com", "", ErrInvalidDID},
		{"did:web:.example.com", "", ErrInvalidDID},
		{"did:web:example.com::a", "", ErrInvalidDID},
		{"did:web:example.com:..", "", ErrInvalidDID},
		{"did:web:example.com:.", "", ErrInvalidDID},
		{"did:web:example.com:a%2Fb", "", ErrInvalidDID},
		{"did:web:example.com:a%00b", "", ErrInvalidDID},
		{"did:web:" + strings.Repeat("a.", 130) + "com", "", ErrInvalidDID},
		{"did:web:" + strings.Repeat("a", 64) + ".com", "", ErrInvalidDID},
	}
	for _, tc := range tests {
		t.Run(tc.did, func(t *testing.T) {
			d, err := ParseDID(tc.did)
			var got string
			if err == nil {
				got, err = webURL(d, false)
			}
			wantErr(t, err, tc.err)
			checkOneSentinel(t, err)
			if got != tc.want {
				t.Fatalf("webURL = %q, want %q", got, tc.want)
			}
		})
	}
}

func webDoc(did string) string {
	return fmt.Sprintf(`{"id":%q,"verificationMethod":[{"id":"#k","type":"Ed25519VerificationKey2020","publicKeyMultibase":"z6MktDeZmp9n8K334seLnTYeKkePNmWRfSVhoighWct9zK74"}],"authentication":["#k"]}`, did)
}

func TestWebResolve(t *testing.T) {
	ctx := context.Background()

	t.Run("path DID", func(t *testing.T) {
		const did = "did:web:agent.example.com:users:alice"
		ts, _ := tlsServer(t, serveDoc("/users/alice/did.json", webDoc(did)))
		doc, err := testResolver(ts).Resolve(ctx, did)
		if err != nil || doc.ID != did {
			t.Fatalf("%v", err)
		}
	})

	t.Run("port DID", func(t *testing.T) {
		ts, _ := tlsServer(t, nil)
		port := ts.Listener.Addr().(*net.TCPAddr).Port
		did := fmt.Sprintf("did:web:127.0.0.1%%3A%d:x", port)
		ts.Config.Handler = serveDoc("/x/did.json", webDoc(did))
		doc, err := testResolver(ts).Resolve(ctx, did)
		if err != nil || doc.ID != did {
			t.Fatalf("%v", err)
		}
	})

	t.Run("fragment ignored", func(t *testing.T) {
		const did = "did:web:agent.example.com"
		ts, _ := tlsServer(t, serveDoc("/.well-known/did.json", webDoc(did)))
		doc, err := testResolver(ts).Resolve(ctx, did+"#k")
		if err != nil || doc.ID != did {
			t.Fatalf("%v", err)
		}
	})

	t.Run("id mismatch", func(t *testing.T) {
		ts, _ := tlsServer(t, serveDoc("/.well-known/did.json", webDoc("did:web:agent.example.com:other")))
		_, err := testResolver(ts).Resolve(ctx, "did:web:agent.example.com")
		wantErr(t, err, ErrIDMismatch)
	})

	t.Run("invalid document", func(t *testing.T) {
		ts, _ := tlsServer(t, serveDoc("/.well-known/did.json", `{"id": "did:web:agent.example.com", "verificationMethod": "SECRET"}`))
		_, err := testResolver(ts).Resolve(ctx, "did:web:agent.example.com")
		wantErr(t, err, ErrInvalidDocument)
		if strings.Contains(err.Error(), "SECRET") {
			t.Fatalf("error leaks the body: %v", err)
		}
	})

	const did = "did:web:agent.example.com"
	doc := webDoc(did)
	t.Run("size at cap", func(t *testing.T) {
		ts, _ := tlsServer(t, serveDoc("/.well-known/did.json", doc))
		_, err := testResolver(ts, WithMaxDocumentSize(int64(len(doc)))).Resolve(ctx, did)
		wantErr(t, err, nil)
	})
	t.Run("too large with length", func(t *testing.T) {
		ts, _ := tlsServer(t, serveDoc("/.well-known/did.json", doc))
		_, err := testResolver(ts, WithMaxDocumentSize(int64(len(doc)-1))).Resolve(ctx, did)
		wantErr(t, err, ErrTooLarge)
	})
	t.Run("too large streamed", func(t *testing.T) {
		ts, _ := tlsServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			// Flushing first forces chunked encoding: no Content-Length.
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			for range 100 {
				io.WriteString(w, strings.Repeat(" ", 1024))
			}
		}))
		_, err := testResolver(ts).Resolve(ctx, did)
		wantErr(t, err, ErrTooLarge)
	})

	t.Run("timeout", func(t *testing.T) {
		ts, _ := tlsServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-time.After(10 * time.Second):
			}
		}))
		start := time.Now()
		_, err := testResolver(ts, WithTimeout(200*time.Millisecond)).Resolve(ctx, did)
		wantErr(t, err, ErrFetch)
		checkOneSentinel(t, err)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("error %v does not report the deadline", err)
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Fatalf("took %v", d)
		}
	})

	t.Run("caller cancellation", func(t *testing.T) {
		ts, _ := tlsServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			<-r.Context().Done()
		}))
		cctx, cancel := context.WithCancel(ctx)
		time.AfterFunc(100*time.Millisecond, cancel)
		_, err := testResolver(ts).Resolve(cctx, did)
		wantErr(t, err, ErrFetch)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("error %v", err)
		}
	})

	for _, tc := range []struct {
		status int
		err    error
	}{
		{http.StatusNotFound, ErrNotFound},
		{http.StatusGone, ErrNotFound},
		{http.StatusInternalServerError, ErrFetch},
		{http.StatusForbidden, ErrFetch},
		{http.StatusNoContent, ErrInvalidDocument},
		{http.StatusMovedPermanently, ErrFetch},
		{http.StatusFound, ErrFetch},
		{http.StatusTemporaryRedirect, ErrFetch},
	} {
		t.Run(fmt.Sprintf("status %d", tc.status), func(t *testing.T) {
			var followed atomic.Bool
			mux := http.NewServeMux()
			mux.HandleFunc("/.well-known/did.json", func(w http.ResponseWriter, r *http.Request) {
				if tc.status/100 == 3 {
					w.Header().Set("Location", "/elsewhere/did.json")
				}
				w.WriteHeader(tc.status)
			})
			mux.HandleFunc("/elsewhere/did.json", func(w http.ResponseWriter, r *http.Request) {
				followed.Store(true)
				io.WriteString(w, doc)
			})
			ts, _ := tlsServer(t, mux)
			_, err := testResolver(ts).Resolve(ctx, did)
			wantErr(t, err, tc.err)
			checkOneSentinel(t, err)
			if followed.Load() {
				t.Fatal("redirect was followed")
			}
		})
	}

	t.Run("https only", func(t *testing.T) {
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			port := requestPort(r)
			io.WriteString(w, webDoc("did:web:127.0.0.1%3A"+port))
		}))
		ts.Config.ErrorLog = log.New(io.Discard, "", 0)
		defer ts.Close()
		port := ts.Listener.Addr().(*net.TCPAddr).Port
		local := fmt.Sprintf("did:web:127.0.0.1%%3A%d", port)
		// Every name is dialled to the plain-http server.
		toServer := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, ts.Listener.Addr().String())
		}}}
		// Without WithAllowHTTP the resolver speaks TLS and fails.
		_, err := New(WithHTTPClient(toServer), WithAllowPrivateAddresses(true)).Resolve(ctx, local)
		wantErr(t, err, ErrFetch)
		// WithAllowHTTP alone changes nothing.
		_, err = New(WithHTTPClient(toServer), WithAllowHTTP(true)).Resolve(ctx, local)
		wantErr(t, err, ErrForbiddenAddress)
		// Both options: http to a local host.
		got, err := New(WithHTTPClient(toServer), WithAllowPrivateAddresses(true), WithAllowHTTP(true)).Resolve(ctx, local)
		if err != nil || got.ID != local {
			t.Fatalf("plain http with both options: %v", err)
		}
		// A named host stays on https even with both options.
		_, err = New(WithHTTPClient(toServer), WithAllowPrivateAddresses(true), WithAllowHTTP(true)).Resolve(ctx, did)
		wantErr(t, err, ErrFetch)
		for in, want := range map[string]string{
			"did:web:localhost%3A8080":       "http://localhost:8080/.well-known/did.json",
			"did:web:10.1.2.3:a":             "http://10.1.2.3/a/did.json",
			"did:web:8.8.8.8":                "https://8.8.8.8/.well-known/did.json",
			"did:web:agent.example.com":      "https://agent.example.com/.well-known/did.json",
			"did:web:localhost.evil.example": "https://localhost.evil.example/.well-known/did.json",
		} {
			d, _ := ParseDID(in)
			if got, err := webURL(d, true); err != nil || got != want {
				t.Errorf("webURL(%s, plain local) = %q, %v; want %q", in, got, err, want)
			}
		}
	})
}

// requestPort returns the port the request was addressed to.
func requestPort(r *http.Request) string {
	_, port, _ := net.SplitHostPort(r.Host)
	return port
}

func TestWebSSRFGuard(t *testing.T) {
	ctx := context.Background()
	const did = "did:web:agent.example.com"

	t.Run("own transport refuses loopback", func(t *testing.T) {
		ts, hits := tlsServer(t, serveDoc("/.well-known/did.json", webDoc(did)))
		port := ts.Listener.Addr().(*net.TCPAddr).Port
		for _, host := range []string{"127.0.0.1", "localhost"} {
			_, err := New().Resolve(ctx, fmt.Sprintf("did:web:%s%%3A%d", host, port))
			wantErr(t, err, ErrForbiddenAddress)
			checkOneSentinel(t, err)
		}
		if hits.Load() != 0 {
			t.Fatal("request reached the server")
		}
	})

	t.Run("custom client's dialer is guarded", func(t *testing.T) {
		// ts.Client() maps agent.example.com to 127.0.0.1 with its own
		// DialContext, standing in for a DNS answer pointing inside.
		ts, hits := tlsServer(t, serveDoc("/.well-known/did.json", webDoc(did)))
		_, err := New(WithHTTPClient(ts.Client())).Resolve(ctx, did)
		wantErr(t, err, ErrForbiddenAddress)
		_, err = New(WithHTTPClient(ts.Client()), WithAllowPrivateAddresses(false)).Resolve(ctx, did)
		wantErr(t, err, ErrForbiddenAddress)
		if hits.Load() != 0 {
			t.Fatal("request reached the server")
		}
		// The caller's client is not modified.
		if _, err := ts.Client().Get(ts.URL + "/.well-known/did.json"); err != nil {
			t.Fatalf("caller's client broken: %v", err)
		}
	})

	t.Run("custom client without transport", func(t *testing.T) {
		ts, _ := tlsServer(t, serveDoc("/.well-known/did.json", webDoc(did)))
		port := ts.Listener.Addr().(*net.TCPAddr).Port
		_, err := New(WithHTTPClient(&http.Client{})).Resolve(ctx, fmt.Sprintf("did:web:127.0.0.1%%3A%d", port))
		wantErr(t, err, ErrForbiddenAddress)
	})

	t.Run("unguardable transport", func(t *testing.T) {
		var called atomic.Bool
		rt := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			called.Store(true)
			return nil, errors.New("unreachable")
		})
		_, err := New(WithHTTPClient(&http.Client{Transport: rt})).Resolve(ctx, did)
		wantErr(t, err, ErrForbiddenAddress)
		if called.Load() {
			t.Fatal("unguarded transport was used")
		}
		// Allowed explicitly, the same transport is used.
		_, err = New(WithHTTPClient(&http.Client{Transport: rt}), WithAllowPrivateAddresses(true)).Resolve(ctx, did)
		wantErr(t, err, ErrFetch)
		if !called.Load() {
			t.Fatal("transport not used")
		}
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestRefusedAddr(t *testing.T) {
	refused := []string{
		"127.0.0.1", "127.5.5.5", "10.0.0.1", "172.16.0.1", "172.31.255.255", "192.168.1.1",
		"100.64.0.1", "100.127.255.254", "169.254.169.254", "0.0.0.0", "0.1.2.3", "224.0.0.1",
		"255.255.255.255", "240.0.0.1", "198.18.0.1", "192.0.2.1",
		"::", "::1", "fc00::1", "fd12:3456::1", "fe80::1", "fe80::1%eth0", "ff02::1", "fec0::1",
		"::ffff:127.0.0.1", "::ffff:10.0.0.1", "::ffff:169.254.169.254", "::ffff:100.64.0.1",
		"::127.0.0.1", "64:ff9b::10.0.0.1", "64:ff9b::127.0.0.1", "2002:a00:1::1", "2002:7f00:1::1",
		"2001:db8::1", "64:ff9b:1::1",
	}
	allowed := []string{
		"8.8.8.8", "1.1.1.1", "93.184.216.34", "100.63.255.255", "100.128.0.1", "172.32.0.1",
		"2606:4700:4700::1111", "::ffff:8.8.8.8", "64:ff9b::8.8.8.8", "2002:808:808::1",
	}
	for _, s := range refused {
		if !refusedAddr(netip.MustParseAddr(s)) {
			t.Errorf("%s allowed, want refused", s)
		}
	}
	for _, s := range allowed {
		if refusedAddr(netip.MustParseAddr(s)) {
			t.Errorf("%s refused, want allowed", s)
		}
	}
	if !refusedAddr(netip.Addr{}) {
		t.Error("invalid address allowed")
	}
	if err := checkDialAddress("not an address"); !errors.Is(err, ErrForbiddenAddress) {
		t.Errorf("unparsable dial address: %v", err)
	}
}

func TestRouter(t *testing.T) {
	r := New()
	for _, tc := range []struct {
		did string
		err error
	}{
		{"did:example:123", ErrUnsupportedMethod},
		{"did:ethr:0xabc", ErrUnsupportedMethod},
		{"did:KEY:z6Mk", ErrInvalidDID},
		{"not a did", ErrInvalidDID},
		{"", ErrInvalidDID},
	} {
		_, err := r.Resolve(context.Background(), tc.did)
		wantErr(t, err, tc.err)
		checkOneSentinel(t, err)
	}
}
