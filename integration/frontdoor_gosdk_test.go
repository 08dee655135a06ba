package integration

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// TestFrontDoorGoSDK: the Go SDK's own OAuth client (auth.AuthorizationCode
// Handler: RFC 9728 and RFC 8414 discovery, dynamic registration, PKCE, the
// RFC 9207 iss check) gets a delegation through the edge's front door; the
// user approves every scope in Chromium, and the calls reach the upstream
// with the new delegation's identity.
func TestFrontDoorGoSDK(t *testing.T) {
	fd := newFrontDoor(t)
	b := newBrowser(t)
	b.signIn(frontDoorOther, frontDoorPassword)
	ctx := frontDoorContext(t)

	// The agent's loopback redirect target: it only reads the query.
	redirects := make(chan url.Values, 1)
	cb := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case redirects <- r.URL.Query():
		default:
		}
		fmt.Fprintln(w, "signed in; you may close this window")
	}))
	t.Cleanup(cb.Close)
	redirectURI := cb.URL + "/callback"

	// The SDK calls the fetcher from inside Connect; the browser is driven
	// on the test goroutine, so the fetcher hands the URL over and waits.
	authURLs := make(chan string, 1)
	results := make(chan *auth.AuthorizationResult, 1)
	handler, err := auth.NewAuthorizationCodeHandler(&auth.AuthorizationCodeHandlerConfig{
		DynamicClientRegistrationConfig: &auth.DynamicClientRegistrationConfig{
			Metadata: &oauthex.ClientRegistrationMetadata{
				ClientName:              "go-sdk frontdoor test",
				RedirectURIs:            []string{redirectURI},
				GrantTypes:              []string{"authorization_code", "refresh_token"},
				ResponseTypes:           []string{"code"},
				TokenEndpointAuthMethod: "none",
			},
		},
		RequestRefreshToken: true,
		AuthorizationCodeFetcher: func(ctx context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
			authURLs <- args.URL
			select {
			case res := <-results:
				return res, nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}

	done := connectInBackground(ctx, "frontdoor-gosdk", &mcp.StreamableClientTransport{Endpoint: fd.mcpURL(), OAuthHandler: handler})

	select {
	case u := <-authURLs:
		page := b.openConsent(u)
		if !strings.Contains(page.text(), "go-sdk frontdoor test") {
			t.Errorf("consent page does not name the registered client:\n%s", page.text())
		}
		page.approve()
		q := <-redirects
		if q.Get("error") != "" {
			t.Fatalf("authorization refused: %v", q)
		}
		results <- &auth.AuthorizationResult{Code: q.Get("code"), State: q.Get("state"), Iss: q.Get("iss")}
	case c := <-done:
		t.Fatalf("the Go SDK client never reached the consent page: %v", c.err)
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	c := <-done
	if c.err != nil {
		t.Fatalf("connecting after the sign-in: %v", c.err)
	}
	cs := c.cs
	t.Cleanup(func() { cs.Close() })
	fd.upstream.Reset()

	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := listedTools(tools); !slices.Equal(got, []string{"count", "greet", "whoami"}) {
		t.Errorf("tools/list = %v; want every tool: all scopes were approved", got)
	}
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "whoami"}); err != nil || res.IsError {
		t.Fatalf("tools/call whoami: %v %+v", err, res)
	}
	agent, user := identityOfCall(t, fd.upstream.Requests(), "whoami")
	fd.assertHostedUserDID(ctx, t, user, frontDoorOther)
	if !strings.HasPrefix(agent, "did:") || agent == user {
		t.Errorf("X-Agent-DID %q: want the agent's own DID, not the user's %q", agent, user)
	}
}
