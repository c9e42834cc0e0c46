package daemon

import (
	"os"

	"golang.org/x/sys/unix"
)

// redirectStdio makes f the process's standard output and error (Dup3: linux/arm64 has no dup2).
func redirectStdio(f *os.File) error {
	for _, fd := range []int{1, 2} {
		if err := unix.Dup3(int(f.Fd()), fd, 0); err != nil {
			return err
		}
	}
	return nil
}
