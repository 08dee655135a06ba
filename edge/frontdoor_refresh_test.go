package edge_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpi-edge/caddy-mcpi/challenge"
)

// flakyStore is a shared store whose next failPuts writes fail; it has no
// Peek, so the front door spends a refresh token before checking it.
type flakyStore struct {
	challenge.NonceStore
	challenge.SessionBinder
	failPuts atomic.Int32
}

func (s *flakyStore) Put(ctx context.Context, n string, rec challenge.Record, ttl time.Duration) error {
	if s.failPuts.Add(-1) >= 0 {
		return challenge.ErrStoreUnavailable
	}
	return s.NonceStore.Put(ctx, n, rec, ttl)
}

// peekingFlakyStore can read a record without spending it.
type peekingFlakyStore struct {
	*flakyStore
	peek challenge.Peeker
}

func (s peekingFlakyStore) Peek(ctx context.Context, n string) (challenge.Record, error) {
	return s.peek.Peek(ctx, n)
}

// TestFrontDoorRefusedRefreshKeepsToken: a refresh refused for its client,
// scope or DPoP proof, or because the store failed, does not spend the
// refresh token: the client's retry with it (as the error invites) works,
// and the family is not revoked as if the token had been stolen. When the
// token cannot be kept, the answer does not invite a retry.
func TestFrontDoorRefusedRefreshKeepsToken(t *testing.T) {
	for _, peeking := range []bool{true, false} {
		name := map[bool]string{true: "store that peeks", false: "store that only consumes"}[peeking]
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			t.Cleanup(cancel)
			mem := challenge.NewMemoryStore(ctx)
			flaky := &flakyStore{NonceStore: mem, SessionBinder: mem}
			var store challenge.NonceStore = flaky
			if peeking {
				store = peekingFlakyStore{flaky, mem}
			}
			f := newFrontDoor(t, store, nil)
			id, tok := f.flow("echo:execute")
			refresh := func(v url.Values, hdr http.Header) (int, tokens) {
				v.Set("grant_type", "refresh_token")
				v.Set("refresh_token", tok.RefreshToken)
				if !v.Has("client_id") {
					v.Set("client_id", id)
				}
				return f.token(v, hdr)
			}
			for what, c := range map[string]struct {
				v      url.Values
				hdr    http.Header
				status int
				code   string
			}{
				"a scope not granted": {url.Values{"scope": {"files:read"}}, nil, 400, "invalid_scope"},
				"another client":      {url.Values{"client_id": {"someone-else"}}, nil, 400, "invalid_grant"},
				"a bad DPoP proof":    {url.Values{}, http.Header{"Dpop": {"not-a-proof"}}, 400, "invalid_dpop_proof"},
			} {
				if s, r := refresh(c.v, c.hdr); s != c.status || r.Error != c.code {
					t.Fatalf("refresh with %s: %d %+v", what, s, r)
				}
			}
			// The successor cannot be stored: the answer invites a retry,
			// and the retry works.
			flaky.failPuts.Store(1)
			if s, r := refresh(url.Values{}, nil); s != 503 || r.Error != "temporarily_unavailable" {
				t.Fatalf("refresh with the store failing once: %d %+v", s, r)
			}
			s, tok2 := refresh(url.Values{}, nil)
			if s != 200 || tok2.RefreshToken == "" {
				t.Fatalf("retry after refused refreshes: %d %+v", s, tok2)
			}
			if res, body := f.call(tok2.AccessToken, "Bearer", echoCall, nil); res.StatusCode != 200 {
				t.Fatalf("credential after the retry: %d %s", res.StatusCode, body)
			}
			// The store fails for good after the token was spent: no
			// invitation to retry with it.
			tok = tok2
			flaky.failPuts.Store(100)
			res, body := f.postForm("/oauth/token", url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tok.RefreshToken}, "client_id": {id}}, false, nil)
			if res.StatusCode != 503 || strings.Contains(string(body), "; retry") || !strings.Contains(string(body), "do not retry") {
				t.Fatalf("refresh with the store down after spending: %d %s", res.StatusCode, body)
			}
			flaky.failPuts.Store(0)
		})
	}
}
