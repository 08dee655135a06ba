// Package caddympi is what `xcaddy build --with github.com/mcpi-edge/caddy-mcpi`
// imports: importing it registers the mcpi Caddy modules, directive and
// subcommands (they live in caddymodule/).
package caddympi

import _ "github.com/mcpi-edge/caddy-mcpi/caddymodule"
