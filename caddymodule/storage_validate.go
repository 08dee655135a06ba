package caddymodule

import (
	"os"
	"slices"
)

// `caddy validate` provisions every module as `caddy run` does, and the
// edge's provisioning loads its keys from Caddy's storage, creating them
// there when they are missing. A validation must leave no trace, so under
// it the edge gets a read-only view of the storage (assertion.ReadOnly).
// Caddy gives a module no sign that it is being validated rather than run;
// the command line is the sign.

// validatingArgs reports whether args (os.Args) run `caddy validate`, or
// `caddy adapt --validate`.
func validatingArgs(args []string) bool {
	if len(args) < 2 {
		return false
	}
	switch args[1] {
	case "validate":
		return true
	case "adapt":
		return slices.ContainsFunc(args[2:], func(a string) bool {
			return a == "--validate" || a == "-validate" || a == "--validate=true" || a == "-validate=true"
		})
	}
	return false
}

// validating is validatingArgs of this process.
func validating() bool { return validatingArgs(os.Args) }
