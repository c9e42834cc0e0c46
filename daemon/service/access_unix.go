//go:build unix

package service

import (
	"io/fs"
	"syscall"
)

// fileOwner returns the numeric owner and group of a file.
func fileOwner(info fs.FileInfo) (uid, gid int, ok bool) {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, false
	}
	return int(st.Uid), int(st.Gid), true
}
