// Command caddy is Caddy with the standard modules and the caddy-mcpi plugin,
// for tests, the demo and benchmarks without xcaddy.
package main

import (
	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "github.com/mcpi-edge/caddy-mcpi/caddymodule"
)

func main() {
	caddycmd.Main()
}
