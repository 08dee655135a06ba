package edge

import "github.com/mcpi-edge/caddy-mcpi/edge/toolpolicy"

// The tool policy's settings are the step's own types (edge/toolpolicy);
// these names keep them where Config and its users have always found
// them, so the configuration's Go and JSON shapes do not change.
type (
	// PolicyConfig holds the MCP-aware authorization settings.
	PolicyConfig = toolpolicy.PolicyConfig
	// ToolPolicy is the rule for the tools whose name matches its Name.
	ToolPolicy = toolpolicy.ToolPolicy
	// RuleConfig is one operator rule.
	RuleConfig = toolpolicy.RuleConfig
	// ToolAnnotationsPolicy gives scopes by annotation class.
	ToolAnnotationsPolicy = toolpolicy.ToolAnnotationsPolicy
)

// ValidActionHost accepts a host name (no scheme, port or path) or
// "*.<host name>".
func ValidActionHost(s string) bool { return toolpolicy.ValidActionHost(s) }
