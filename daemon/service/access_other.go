//go:build !unix

package service

import "io/fs"

// fileOwner reports no owner where files have no Unix owner and group; tfd installs no
// service there (PlatformFor), so only the others' bits are read.
func fileOwner(fs.FileInfo) (uid, gid int, ok bool) { return 0, 0, false }
