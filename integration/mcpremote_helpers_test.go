package integration

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpRemoteDir holds the pinned mcp-remote (package.json and its lock file).
const mcpRemoteDir = "mcpremote"

// mcpRemote is one mcp-remote process: a stdio MCP server that a local
// client talks to, bridging to the remote server and running the MCP
// authorization flow for it, as desktop clients and IDEs use it.
type mcpRemote struct {
	// configDir is MCP_REMOTE_CONFIG_DIR: where it keeps the client
	// registration and the tokens.
	configDir string
	// callback is the loopback address its redirect URI points at.
	callback string
	stderr   *authURLWatcher
}

// authURLRE finds the authorization URL mcp-remote prints when it sends the
// user to sign in (it also tries to open a browser, which the tests stop).
var authURLRE = regexp.MustCompile(`Please authorize this client by visiting:\s*\n(\S+)`)

// authURLWatcher is mcp-remote's stderr: it keeps everything (logged when
// the test fails) and hands out each authorization URL printed, the first
// sign-in's and any step-up's.
type authURLWatcher struct {
	syncBuffer
	mu   sync.Mutex
	sent int
	url  chan string
}

func (w *authURLWatcher) Write(p []byte) (int, error) {
	n, err := w.syncBuffer.Write(p)
	w.mu.Lock()
	defer w.mu.Unlock()
	ms := authURLRE.FindAllStringSubmatch(w.String(), -1)
	for ; w.sent < len(ms); w.sent++ {
		select {
		case w.url <- ms[w.sent][1]:
		default: // nobody will look at so many
		}
	}
	return n, err
}

// nextAuthURL waits for the next authorization URL mcp-remote prints.
func (r *mcpRemote) nextAuthURL(ctx context.Context) (string, error) {
	select {
	case u := <-r.stderr.url:
		return u, nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// connectMCPRemote starts mcp-remote 0.15.1 for serverURL with no
// credential and connects the Go SDK client to it over stdio. When
// mcp-remote prints the authorization URL, signIn is called with it (on the
// test goroutine, with r for its callback address) and must complete the
// sign-in in a browser; the session is returned once mcp-remote has its token and the MCP handshake is done.
func connectMCPRemote(ctx context.Context, t *testing.T, serverURL string, signIn func(authURL string, r *mcpRemote)) (*mcp.ClientSession, *mcpRemote) {
	t.Helper()
	needNodePackages(t, mcpRemoteDir)
	proxy, err := filepath.Abs(filepath.Join(mcpRemoteDir, "node_modules", "mcp-remote", "dist", "proxy.js"))
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	port := freePort(t)
	r := &mcpRemote{
		configDir: filepath.Join(home, "mcp-auth"),
		callback:  "http://localhost:" + strconv.Itoa(port) + "/oauth/callback",
		stderr:    &authURLWatcher{url: make(chan string, 4)},
	}
	cmd := exec.Command("node", proxy, serverURL, strconv.Itoa(port),
		"--transport", "http-only", "--auth-timeout", "120")
	cmd.Env = append(os.Environ(),
		"HOME="+home,
		"MCP_REMOTE_CONFIG_DIR="+r.configDir,
		// The opener mcp-remote uses runs $BROWSER: `true` keeps a
		// developer's own browser closed; the test's Chromium signs in.
		"BROWSER=true", "DISPLAY=", "WAYLAND_DISPLAY=")
	cmd.Stderr = r.stderr
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("mcp-remote stderr:\n%s", r.stderr.String())
		}
	})

	done := connectInBackground(ctx, "frontdoor-mcpremote", &mcp.CommandTransport{Command: cmd})
	select {
	case u := <-r.stderr.url:
		signIn(u, r)
	case c := <-done:
		if c.err == nil {
			c.cs.Close()
			t.Fatal("mcp-remote connected without asking anyone to sign in")
		}
		t.Fatalf("mcp-remote did not get as far as the authorization URL: %v", c.err)
	case <-ctx.Done():
		t.Fatalf("mcp-remote printed no authorization URL: %v", ctx.Err())
	}
	select {
	case c := <-done:
		if c.err != nil {
			t.Fatalf("mcp-remote: connecting after the sign-in: %v", c.err)
		}
		t.Cleanup(func() { c.cs.Close() })
		return c.cs, r
	case <-ctx.Done():
		t.Fatalf("mcp-remote did not finish connecting after the sign-in: %v", ctx.Err())
	}
	return nil, nil
}

// mcpRemoteTokens is what mcp-remote stored after the token exchange.
type mcpRemoteTokens struct {
	AccessToken  string `json:"access_token"`
	TokenType    string `json:"token_type"`
	RefreshToken string `json:"refresh_token"`
	Scope        string `json:"scope"`
}

// tokens reads the tokens mcp-remote saved (one server, one file).
func (r *mcpRemote) tokens(t *testing.T) mcpRemoteTokens {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(r.configDir, "*", "*_tokens.json"))
	if len(files) != 1 {
		t.Fatalf("want one tokens file under %s, found %v", r.configDir, files)
	}
	raw, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	var tok mcpRemoteTokens
	if err := json.Unmarshal(raw, &tok); err != nil {
		t.Fatalf("%s: %v", files[0], err)
	}
	return tok
}

// frontDoorContext bounds one front-door flow: a browser, a Node process
// and a bcrypt check or two on a loaded machine take longer than the
// 30 seconds of testContext.
func frontDoorContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}
