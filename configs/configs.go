// Package configs holds tfd's documented default config file, tfd.toml: every key with its
// default and a comment. `tfd install` writes it where no config exists; packaging ships it.
package configs

import _ "embed"

// Default is the documented default tfd.toml. A test checks that it parses to exactly the
// built-in defaults and lists every key.
//
//go:embed tfd.toml
var Default []byte
