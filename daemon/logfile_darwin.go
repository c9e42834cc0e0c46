package daemon

import (
	"os"

	"golang.org/x/sys/unix"
)

// redirectStdio makes f the process's standard output and error.
func redirectStdio(f *os.File) error {
	for _, fd := range []int{1, 2} {
		if err := unix.Dup2(int(f.Fd()), fd); err != nil {
			return err
		}
	}
	return nil
}
