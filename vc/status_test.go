package vc

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/didresolver"
)

// TestStatus has one row per revocation outcome. Lists are served by a
// local TLS server named status.example.com.
func TestStatus(t *testing.T) {
	f := newFixture(t)
	srv := newStatusServer(t)
	stranger := f.addKey(t, didresolver.Ed25519)
	ctx := context.Background()
	aud := ForAudience(serverDID)

	// The lists, signed by f.ed unless said otherwise.
	lists := map[string][]byte{
		"/revocation":  signEd25519JCS(t, f.ed, listCred(t, f.ed, statusURL("/revocation"), "revocation", false, 42, 1000), false),
		"/suspension":  signEd25519JCS(t, f.ed, listCred(t, f.ed, statusURL("/suspension"), "suspension", false, 5), false),
		"/bitstring":   signEddsaJCS2022(t, f.ed, listCred(t, f.ed, statusURL("/bitstring"), "revocation", true, 42), nil),
		"/by-stranger": signEd25519JCS(t, stranger, listCred(t, stranger, statusURL("/by-stranger"), "revocation", false, 42), false),
		"/expired": func() []byte {
			c := listCred(t, f.ed, statusURL("/expired"), "revocation", true)
			c["validUntil"] = fixedNow.Add(-time.Hour).Format(time.RFC3339)
			return signEd25519JCS(t, f.ed, c, false)
		}(),
		"/moved": signEd25519JCS(t, f.ed, listCred(t, f.ed, statusURL("/elsewhere"), "revocation", false), false),
		"/tampered": func() []byte {
			m := decodeJSON(t, signEd25519JCS(t, f.ed, listCred(t, f.ed, statusURL("/tampered"), "revocation", false, 42), false))
			setPath(m, "credentialSubject.encodedList", encodeList(t, 131072, false))
			return mustJSON(t, m)
		}(),
		"/jwt": func() []byte {
			c := listCred(t, f.ed, statusURL("/jwt"), "revocation", false, 42)
			return mint(t, f.ed.priv, header("EdDSA", f.ed.kid), map[string]any{"iss": f.ed.did, "vc": c})
		}(),
		"/not-a-list": signCred(t, f.ed, f.delegationVC(f.ed, f.agent.did, "x", "", "a"), false),
		"/not-gzip": func() []byte {
			c := listCred(t, f.ed, statusURL("/not-gzip"), "revocation", false)
			setPath(c, "credentialSubject.encodedList", b64([]byte("plain bytes")))
			return signEd25519JCS(t, f.ed, c, false)
		}(),
	}
	for path, b := range lists {
		srv.set(path, b)
	}

	// cred is the fixture's JSON credential from f.ed with status.
	cred := func(status any) func(t *testing.T) []byte {
		return func(t *testing.T) []byte {
			c := f.delegationVC(f.ed, f.agent.did, "d-s", "", "a")
			c["credentialStatus"] = status
			return signCred(t, f.ed, c, false)
		}
	}
	entry := func(path, purpose string, bitstring bool, index string) map[string]any {
		return statusEntryFor(statusURL(path), purpose, bitstring, index)
	}
	client := WithStatusLists(srv.client(), true)
	var ancestors [][]byte // set by the chain rows
	down := newStatusServer(t)
	downClient := down.client()
	down.srv.Close() // connections are refused from now on

	tests := []struct {
		chain  bool // verify with the ancestors the row's raw set
		name   string
		raw    func(t *testing.T) []byte
		opts   []Option
		checks []CheckOption
		want   error
		reason string
		detail string
	}{
		{name: "ok StatusList2021 bit clear", raw: cred(entry("/revocation", "revocation", false, "7"))},
		{name: "ok Bitstring bit clear", raw: cred(entry("/bitstring", "revocation", true, "41"))},
		{name: "ok list as a VC-JWT", raw: cred(entry("/jwt", "revocation", false, "7"))},
		{name: "ok entry array, both clear", raw: cred([]any{
			entry("/revocation", "revocation", false, "7"), entry("/suspension", "suspension", false, "7"),
		})},
		{name: "ok purpose without effect on validity is not fetched", raw: cred(entry("/nowhere", "refresh", true, "42"))},
		{name: "ok list by another issuer trusted by name", raw: cred(entry("/by-stranger", "revocation", false, "7")),
			opts: []Option{WithTrustedIssuers(f.ed.did, stranger.did)}},
		{name: "ok status not checked when turned off", raw: cred(entry("/revocation", "revocation", false, "42")),
			opts: []Option{WithoutStatusCheck()}},
		{name: "ok revoked chain link not checked when turned off", raw: cred(entry("/nowhere", "revocation", false, "1")),
			opts: []Option{WithoutStatusCheck()}},

		{name: "revoked leaf", raw: cred(entry("/revocation", "revocation", false, "42")), want: ErrRevoked, reason: "revoked"},
		{name: "revoked leaf, high index", raw: cred(entry("/revocation", "revocation", false, "1000")), want: ErrRevoked, reason: "revoked"},
		{name: "revoked leaf, Bitstring", raw: cred(entry("/bitstring", "revocation", true, "42")), want: ErrRevoked, reason: "revoked"},
		{name: "revoked leaf, second entry", raw: cred([]any{
			entry("/revocation", "revocation", false, "7"), entry("/suspension", "suspension", false, "5"),
		}), want: ErrRevoked, reason: "revoked", detail: "suspended"},
		{name: "suspended", raw: cred(entry("/suspension", "suspension", false, "5")), want: ErrRevoked, reason: "revoked", detail: "suspended"},
		{name: "entry without purpose counts as revocation", raw: func(t *testing.T) []byte {
			e := entry("/revocation", "", false, "42")
			delete(e, "statusPurpose")
			return cred(e)(t)
		}, want: ErrRevoked, reason: "revoked"},
		{name: "revoked ancestor", raw: func(t *testing.T) []byte {
			ch := f.chain3(t, func(i int, c map[string]any) {
				if i == 0 {
					c["credentialStatus"] = entry("/revocation", "revocation", false, "42")
				}
			})
			ancestors = [][]byte{ch.root, ch.middle}
			return ch.leaf
		}, chain: true, want: ErrRevoked, reason: "revoked", detail: "ancestor"},
		{name: "ok chain, ancestor not revoked", raw: func(t *testing.T) []byte {
			ch := f.chain3(t, func(i int, c map[string]any) {
				if i == 0 {
					c["credentialStatus"] = entry("/revocation", "revocation", false, "43")
				}
			})
			ancestors = [][]byte{ch.root, ch.middle}
			return ch.leaf
		}, chain: true},
		{name: "status list unreachable", raw: cred(entry("/missing", "revocation", false, "7")),
			want: ErrStatusUnavailable, reason: "status_unavailable", detail: "404"},
		{name: "status list server down (fail closed)", raw: cred(entry("/revocation", "revocation", false, "7")),
			opts: []Option{WithStatusLists(downClient, true)}, want: ErrStatusUnavailable, reason: "status_unavailable", detail: "fetching"},
		{name: "status list server down, stale-if-error without a copy", raw: cred(entry("/revocation", "revocation", false, "7")),
			opts: []Option{WithStatusLists(downClient, true), WithStatusStaleIfError(time.Hour)}, want: ErrStatusUnavailable, reason: "status_unavailable"},
		{name: "status list with bad signature", raw: cred(entry("/tampered", "revocation", false, "7")),
			want: ErrStatusList, reason: "bad_status_list", detail: "signature"},
		{name: "status list by another issuer", raw: cred(entry("/by-stranger", "revocation", false, "7")),
			want: ErrStatusList, reason: "bad_status_list", detail: "issuer"},
		{name: "status list by another issuer, any issuer trusted", raw: cred(entry("/by-stranger", "revocation", false, "7")),
			opts: []Option{WithTrustedIssuers(AnyIssuer)}, want: ErrStatusList, reason: "bad_status_list", detail: "issuer"},
		{name: "status list purpose differs", raw: cred(entry("/suspension", "revocation", false, "7")),
			want: ErrStatusList, reason: "bad_status_list", detail: "purpose"},
		{name: "status list kind differs", raw: cred(entry("/bitstring", "revocation", false, "7")),
			want: ErrStatusList, reason: "bad_status_list", detail: "type"},
		{name: "status list expired", raw: cred(entry("/expired", "revocation", true, "7")),
			want: ErrStatusList, reason: "bad_status_list", detail: "expired"},
		{name: "status list id is another URL", raw: cred(entry("/moved", "revocation", false, "7")),
			want: ErrStatusList, reason: "bad_status_list", detail: "URL"},
		{name: "status list is not a list", raw: cred(entry("/not-a-list", "revocation", false, "7")),
			want: ErrStatusList, reason: "bad_status_list"},
		{name: "status list not gzip", raw: cred(entry("/not-gzip", "revocation", false, "7")),
			want: ErrStatusList, reason: "bad_status_list", detail: "encodedList"},
		{name: "index outside the list", raw: cred(entry("/revocation", "revocation", false, "131072")),
			want: ErrStatusList, reason: "bad_status_list", detail: "outside"},
		{name: "index not a number", raw: cred(entry("/revocation", "revocation", false, "-1")),
			want: ErrMalformed, reason: "malformed"},
		{name: "list URL not https", raw: func(t *testing.T) []byte {
			e := entry("/revocation", "revocation", false, "7")
			e["statusListCredential"] = "http://" + statusHost + "/revocation"
			return cred(e)(t)
		}, want: ErrMalformed, reason: "malformed"},
		{name: "unknown status type fails closed", raw: func(t *testing.T) []byte {
			e := entry("/revocation", "revocation", false, "7")
			e["type"] = "RevocationList2020Status"
			return cred(e)(t)
		}, want: ErrStatusUnavailable, reason: "status_unavailable"},
		{name: "statusSize above 1", raw: func(t *testing.T) []byte {
			e := entry("/bitstring", "revocation", true, "7")
			e["statusSize"] = 2
			return cred(e)(t)
		}, want: ErrMalformed, reason: "malformed"},
		{name: "private address refused by default", raw: cred(entry("/revocation", "revocation", false, "7")),
			opts: []Option{WithStatusLists(srv.client(), false)}, want: ErrStatusUnavailable, reason: "status_unavailable"},
	}

	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			raw := tc.raw(t)
			opts := append([]Option{client}, tc.opts...)
			checks := []CheckOption{aud}
			if tc.chain {
				checks = append(checks, WithAncestors(ancestors...))
			}
			d, err := f.verifier(opts...).Verify(ctx, raw, checks...)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("Verify: %v", err)
				}
				return
			}
			expectRefusal(t, d, err, tc.want, tc.reason, tc.detail)
		})
	}

	t.Run("guard error names the forbidden address", func(t *testing.T) {
		_, err := f.verifier(WithStatusLists(srv.client(), false)).Verify(ctx, cred(entry("/revocation", "revocation", false, "7"))(t), aud)
		if !errors.Is(err, didresolver.ErrForbiddenAddress) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("default client refuses the loopback server", func(t *testing.T) {
		c := f.delegationVC(f.ed, f.agent.did, "d-s", "", "a")
		c["credentialStatus"] = statusEntryFor("https://"+srv.srv.Listener.Addr().String()+"/revocation", "revocation", false, "7")
		_, err := f.verifier().Verify(ctx, signCred(t, f.ed, c, false), aud)
		if !errors.Is(err, ErrStatusUnavailable) || !errors.Is(err, didresolver.ErrForbiddenAddress) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("unguardable transport fails closed", func(t *testing.T) {
		odd := &http.Client{Transport: roundTripperFunc(func(*http.Request) (*http.Response, error) {
			return nil, errors.New("never called")
		})}
		_, err := f.verifier(WithStatusLists(odd, false)).Verify(ctx, cred(entry("/revocation", "revocation", false, "7"))(t), aud)
		if !errors.Is(err, ErrStatusUnavailable) {
			t.Fatalf("err = %v", err)
		}
	})
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestStatusCache: one fetch per TTL, one fetch in flight, fail closed,
// stale-if-error.
func TestStatusCache(t *testing.T) {
	f := newFixture(t)
	srv := newStatusServer(t)
	ctx := context.Background()
	aud := ForAudience(serverDID)
	srv.set("/list", signEd25519JCS(t, f.ed, listCred(t, f.ed, statusURL("/list"), "revocation", false, 42), false))
	credAt := func(index string) []byte {
		c := f.delegationVC(f.ed, f.agent.did, "d-"+index, "", "a")
		c["credentialStatus"] = statusEntryFor(statusURL("/list"), "revocation", false, index)
		return signCred(t, f.ed, c, false)
	}
	active, revoked := credAt("7"), credAt("42")

	t.Run("TTL", func(t *testing.T) {
		clock := &testClock{t: fixedNow}
		v := NewVerifier(f.res, WithClock(clock.now), WithStatusLists(srv.client(), true), WithStatusListTTL(30*time.Second))
		before := srv.hitCount("/list")
		for i := 0; i < 3; i++ {
			if _, err := v.Verify(ctx, active, aud); err != nil {
				t.Fatal(err)
			}
			if _, err := v.Verify(ctx, revoked, aud); !errors.Is(err, ErrRevoked) {
				t.Fatal(err)
			}
		}
		if n := srv.hitCount("/list") - before; n != 1 {
			t.Fatalf("fetched %d times within the TTL", n)
		}
		clock.add(31 * time.Second)
		if _, err := v.Verify(ctx, active, aud); err != nil {
			t.Fatal(err)
		}
		if n := srv.hitCount("/list") - before; n != 2 {
			t.Fatalf("fetched %d times after the TTL", n)
		}
	})

	t.Run("one fetch in flight", func(t *testing.T) {
		v := NewVerifier(f.res, WithClock(func() time.Time { return fixedNow }), WithStatusLists(srv.client(), true))
		srv.mu.Lock()
		srv.delay = 100 * time.Millisecond
		srv.mu.Unlock()
		defer func() { srv.mu.Lock(); srv.delay = 0; srv.mu.Unlock() }()
		before := srv.hitCount("/list")
		var wg sync.WaitGroup
		errs := make([]error, 8)
		for i := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = v.Verify(ctx, active, aud)
			}()
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		if n := srv.hitCount("/list") - before; n != 1 {
			t.Fatalf("%d fetches for concurrent checks", n)
		}
	})

	t.Run("caller gives up while a fetch is in flight", func(t *testing.T) {
		v := NewVerifier(f.res, WithClock(func() time.Time { return fixedNow }), WithStatusLists(srv.client(), true))
		srv.mu.Lock()
		srv.delay = 200 * time.Millisecond
		srv.mu.Unlock()
		defer func() { srv.mu.Lock(); srv.delay = 0; srv.mu.Unlock() }()
		cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
		defer cancel()
		_, err := v.Verify(cctx, active, aud)
		if !errors.Is(err, ErrStatusUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v", err)
		}
		// The fetch went on and a patient caller gets its result.
		if _, err := v.Verify(ctx, active, aud); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("fail closed, then stale-if-error", func(t *testing.T) {
		for _, stale := range []time.Duration{0, 10 * time.Minute} {
			clock := &testClock{t: fixedNow}
			v := NewVerifier(f.res, WithClock(clock.now), WithStatusLists(srv.client(), true), WithStatusStaleIfError(stale))
			if _, err := v.Verify(ctx, active, aud); err != nil {
				t.Fatal(err)
			}
			srv.setCode(http.StatusServiceUnavailable)
			clock.add(2 * time.Minute) // past the 60s TTL
			_, err := v.Verify(ctx, active, aud)
			if stale == 0 {
				if !errors.Is(err, ErrStatusUnavailable) || Reason(err) != "status_unavailable" {
					t.Fatalf("no stale window: err = %v", err)
				}
			} else {
				if err != nil {
					t.Fatalf("within the stale window: %v", err)
				}
				// The stale list still revokes.
				if _, err := v.Verify(ctx, revoked, aud); !errors.Is(err, ErrRevoked) {
					t.Fatalf("stale list, revoked credential: %v", err)
				}
				clock.add(stale)
				if _, err := v.Verify(ctx, active, aud); !errors.Is(err, ErrStatusUnavailable) {
					t.Fatalf("past the stale window: err = %v", err)
				}
			}
			srv.setCode(0)
			// Failures are remembered for a few seconds, then retried.
			clock.add(10 * time.Second)
			if _, err := v.Verify(ctx, active, aud); err != nil {
				t.Fatalf("after recovery: %v", err)
			}
		}
	})

	t.Run("bounded", func(t *testing.T) {
		v := NewVerifier(f.res, WithClock(func() time.Time { return fixedNow }), WithStatusLists(srv.client(), true))
		s := v.status.(*statusLists)
		s.maxEntries = 2
		for i, p := range []string{"/a", "/b", "/c", "/d"} {
			srv.set(p, signEd25519JCS(t, f.ed, listCred(t, f.ed, statusURL(p), "revocation", false), false))
			c := f.delegationVC(f.ed, f.agent.did, "d-b"+p, "", "a")
			c["credentialStatus"] = statusEntryFor(statusURL(p), "revocation", false, "1")
			if _, err := v.Verify(ctx, signCred(t, f.ed, c, false), aud); err != nil {
				t.Fatalf("list %d: %v", i, err)
			}
		}
		s.mu.Lock()
		n, size := len(s.entries), s.cachedBytes
		s.mu.Unlock()
		if n > 2 || size != n*131072/8 {
			t.Fatalf("%d entries, %d bytes cached", n, size)
		}
	})
}

// TestVectorsStatusListBits decodes the vector's list directly: 131072
// bits, bit 7 clear, bit 42 set (SOURCE.md).
func TestVectorsStatusListBits(t *testing.T) {
	vf := loadVectors(t, "status-list.json")
	for _, vec := range vf.Vectors {
		for _, list := range vec.Input.StatusLists {
			var l struct {
				CredentialSubject struct {
					EncodedList string `json:"encodedList"`
				} `json:"credentialSubject"`
			}
			if err := json.Unmarshal(list, &l); err != nil {
				t.Fatal(err)
			}
			bits, err := decodeStatusList(l.CredentialSubject.EncodedList, maxStatusListBytes)
			if err != nil {
				t.Fatal(err)
			}
			if len(bits)*8 != 131072 || bits[0]&(0x80>>7) != 0 || bits[5]&(0x80>>2) == 0 {
				t.Fatalf("%s: %d bits, byte 0 %08b, byte 5 %08b", vec.ID, len(bits)*8, bits[0], bits[5])
			}
			for i, b := range bits {
				if b != 0 && i != 5 {
					t.Errorf("byte %d = %08b, only bit 42 should be set", i, b)
				}
			}
		}
	}
}

// TestDecodeStatusList covers the encodings and the limits.
func TestDecodeStatusList(t *testing.T) {
	std := func(s string) string {
		return strings.NewReplacer("-", "+", "_", "/").Replace(s)
	}
	list := encodeList(t, 64, false, 3)
	pad := list + strings.Repeat("=", (4-len(list)%4)%4)
	tests := []struct {
		name    string
		encoded string
		max     int
		ok      bool
	}{
		{"base64url", list, 1 << 10, true},
		{"base64url padded", pad, 1 << 10, true},
		{"base64", std(list), 1 << 10, true},
		{"base64 padded", std(pad), 1 << 10, true},
		{"multibase u", "u" + list, 1 << 10, true},
		{"exactly the cap", list, 8, true},
		{"over the cap (gzip bomb)", encodeList(t, 16<<20, false), 1 << 20, false},
		{"empty", "", 1 << 10, false},
		{"only u", "u", 1 << 10, false},
		{"not base64", "H4sI!!!", 1 << 10, false},
		{"not gzip", b64([]byte("not a gzip stream")), 1 << 10, false},
		{"truncated gzip", list[:len(list)-8], 1 << 10, false},
		{"empty list", encodeList(t, 0, false), 1 << 10, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			bits, err := decodeStatusList(tc.encoded, tc.max)
			if (err == nil) != tc.ok {
				t.Fatalf("err = %v, want ok %v", err, tc.ok)
			}
			if tc.ok && (len(bits) != 8 || bits[0] != 0x10) {
				t.Fatalf("bits = %x", bits)
			}
		})
	}
}
