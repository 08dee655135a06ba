package integration

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// requireBrowserEnv, set by scripts/test.sh, turns a missing Chromium into a
// failure instead of a skip: CI must run the consent-page tests.
const requireBrowserEnv = "MCPI_REQUIRE_BROWSER"

// chromiumNames are the executables tried, in order: Debian's package is
// chromium, other distributions ship chromium-browser or Chrome.
var chromiumNames = []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"}

var (
	chromiumOnce sync.Once
	chromiumPath string
)

// needChromium returns the path of a Chromium executable, or skips the test
// (fails under MCPI_REQUIRE_BROWSER) when there is none.
func needChromium(t *testing.T) string {
	t.Helper()
	chromiumOnce.Do(func() {
		for _, name := range chromiumNames {
			if p, err := exec.LookPath(name); err == nil {
				chromiumPath = p
				return
			}
		}
	})
	if chromiumPath == "" {
		msg := fmt.Sprintf("no Chromium found (tried %s); install the Debian package chromium (scripts/test.sh does)", strings.Join(chromiumNames, ", "))
		if os.Getenv(requireBrowserEnv) != "" {
			t.Fatalf("headless Chromium needed (%s set): %s", requireBrowserEnv, msg)
		}
		t.Skip(msg)
	}
	return chromiumPath
}

// browser is one headless Chromium with a fresh profile, closed when the
// test ends. It is what a user signing in would use: it follows redirects,
// sends the basic-auth credentials it was given, submits forms.
type browser struct {
	t   *testing.T
	ctx context.Context // a chromedp context that has run once
}

// newBrowser starts headless Chromium for t.
func newBrowser(t *testing.T) *browser {
	t.Helper()
	path := needChromium(t)
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.DisableGPU,
		// Tests run as root in containers, where Chromium's sandbox cannot
		// start.
		chromedp.NoSandbox,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		// The machine has no network but loopback: nothing may phone home.
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1000, 900),
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	// The first Run starts the browser and must not carry a timeout (it
	// would stop the whole browser when it expires).
	if err := chromedp.Do(ctx, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, network.Enable, network.EnableParams{})
		return err
	})); err != nil {
		t.Fatalf("starting Chromium (%s): %v", path, err)
	}
	return &browser{t: t, ctx: ctx}
}

// do runs steps with a deadline, so a page that never shows what is awaited
// fails the test instead of hanging it.
func (b *browser) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.t.Fatalf("browser: %s: %v", what, err)
	}
}

// run runs one action returning a value, with the same deadline as do.
func browserRun[T any](b *browser, what string, a chromedp.Action[T]) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		b.t.Fatalf("browser: %s: %v", what, err)
	}
	return v
}

// signIn makes the browser send HTTP basic credentials on every request,
// as a browser does once its user has answered the sign-in prompt.
func (b *browser) signIn(user, password string) {
	b.t.Helper()
	cred := base64.StdEncoding.EncodeToString([]byte(user + ":" + password))
	b.do("setting the basic-auth header", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{
			Headers: network.Headers{"Authorization": "Basic " + cred},
		})
		return err
	}))
}

// waitLocation waits until the browser's address starts with prefix (a
// redirect after a form was submitted), and returns it.
func (b *browser) waitLocation(prefix string) string {
	b.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		loc, err := chromedp.Run(b.ctx, chromedp.Location())
		if err == nil && strings.HasPrefix(loc, prefix) {
			return loc
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("browser: still at %q (err %v) after 30s, want an address starting %q", loc, err, prefix)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
