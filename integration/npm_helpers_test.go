package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"testing"
)

// requireNodeEnv, set by scripts/test.sh, turns a missing Node or npm into
// a failure instead of a skip: CI must run the Node client tests.
const requireNodeEnv = "MCPI_REQUIRE_NODE"

// nodeInstall is the outcome of installing one folder's packages.
type nodeInstall struct {
	once       sync.Once
	err        error
	skipReason string
}

// nodeInstalls holds one *nodeInstall per folder, so each folder's npm ci
// runs at most once per test binary.
var nodeInstalls sync.Map

// needNodePackages installs the pinned packages of the folder dir (relative
// to integration/) once per test binary (npm ci from its committed lock
// file), or skips the test when Node 20+ and npm are missing (fails instead
// under MCPI_REQUIRE_NODE).
func needNodePackages(t *testing.T, dir string) {
	t.Helper()
	v, _ := nodeInstalls.LoadOrStore(dir, &nodeInstall{})
	in := v.(*nodeInstall)
	in.once.Do(func() { in.skipReason, in.err = installNodePackages(dir) })
	if in.skipReason != "" {
		if os.Getenv(requireNodeEnv) != "" {
			t.Fatalf("Node client needed (%s set): %s", requireNodeEnv, in.skipReason)
		}
		t.Skipf("Node client tests skipped: %s (scripts/test.sh installs Node)", in.skipReason)
	}
	if in.err != nil {
		t.Fatal(in.err)
	}
}

// installNodePackages runs npm ci in dir unless node_modules already
// matches the lock file. A non-empty skip says why Node cannot be used.
func installNodePackages(dir string) (skip string, err error) {
	out, err := exec.Command("node", "--version").Output()
	if err != nil {
		return "node is not installed", nil
	}
	if m := regexp.MustCompile(`^v(\d+)\.`).FindSubmatch(out); m == nil {
		return fmt.Sprintf("node --version said %q", out), nil
	} else if major, _ := strconv.Atoi(string(m[1])); major < 20 {
		return fmt.Sprintf("node %s is older than 20, which the pinned clients need", bytes.TrimSpace(out)), nil
	}
	if _, err := exec.LookPath("npm"); err != nil {
		return "npm is not installed", nil
	}
	// npm records what it installed in node_modules/.package-lock.json.
	lock, err1 := os.ReadFile(filepath.Join(dir, "package-lock.json"))
	installed, err2 := os.ReadFile(filepath.Join(dir, "node_modules", ".package-lock.json"))
	if err1 == nil && err2 == nil && sameInstalledPackages(lock, installed) {
		return "", nil
	}
	cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("npm ci in integration/%s: %v\n%s", dir, err, out)
	}
	return "", nil
}

// sameInstalledPackages reports whether node_modules/.package-lock.json
// lists the same package versions as package-lock.json.
func sameInstalledPackages(lock, installed []byte) bool {
	type pkgs struct {
		Packages map[string]struct {
			Version string `json:"version"`
		} `json:"packages"`
	}
	var a, b pkgs
	if json.Unmarshal(lock, &a) != nil || json.Unmarshal(installed, &b) != nil {
		return false
	}
	for name, p := range a.Packages {
		if name == "" {
			continue // the root project, not installed
		}
		if b.Packages[name].Version != p.Version {
			return false
		}
	}
	return true
}
