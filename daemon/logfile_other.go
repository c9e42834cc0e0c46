//go:build !darwin && !linux

package daemon

import "os"

// redirectStdio leaves standard output and error alone where tfd installs no service
// (service.PlatformFor): --log-file still writes the log there, and a panic's trace stays on the
// console.
func redirectStdio(*os.File) error { return nil }
