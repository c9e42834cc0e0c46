package daemon

import (
	"context"
	"net"
	"syscall"
)

// sendBuffer is the kernel send buffer of every connection tfd accepts. A token stream needs
// little, and a client that stops reading is noticed (server.stall_timeout) once this much and
// its own receive window are full, rather than after the megabytes of replies that the kernel's
// autotuning would let it swallow first, each of them generated for nobody.
const sendBuffer = 64 << 10

// listen binds addr for the API. Accepted connections inherit the listener's send buffer.
func listen(ctx context.Context, addr string) (net.Listener, error) {
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var err error
		if cerr := c.Control(func(fd uintptr) {
			err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_SNDBUF, sendBuffer)
		}); cerr != nil {
			return cerr
		}
		return err
	}}
	return lc.Listen(ctx, "tcp", addr)
}
