package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"tfd/daemon/api"
)

// lastWordsTimeout bounds how long, once the host has closed (its replies done, or cancelled
// after the grace), handlers have to send what they hold, such as a cancelled reply's terminal
// event, before their connections are closed.
const lastWordsTimeout = 2 * time.Second

// closer is what serve needs of the host: scheduler.Host's Close.
type closer interface {
	// Close stops admitting, lets running streams finish until ctx ends, then cancels the rest.
	Close(ctx context.Context) error
}

// serve answers HTTP on ln with handler until ctx ends, then shuts down in order: new requests
// are answered 503 shutting_down (with Retry-After; /health says "stopping") while host's
// running replies have up to grace() to finish (they are cancelled after, each with a terminal
// event); then it stops accepting connections and waits a moment for the handlers to send what
// they hold. It returns nil after a shutdown asked for by ctx, or the error that stopped serving.
// Either way ln and host are closed when it returns. grace is read when the shutdown begins.
func serve(ctx context.Context, ln net.Listener, handler http.Handler, host closer, grace func() time.Duration, logger *slog.Logger) error {
	gate := &stopGate{next: handler}
	srv := &http.Server{
		Handler:           gate,
		ReadHeaderTimeout: 10 * time.Second,
		// No ReadTimeout or WriteTimeout: a reply streams for as long as it takes. The Handler
		// sets deadlines of its own: for the body (HandlerOptions.BodyTimeout) and for each write
		// (server.stall_timeout).
		IdleTimeout:    2 * time.Minute,
		MaxHeaderBytes: 64 << 10,
		ErrorLog:       slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	var serveErr error
	select {
	case serveErr = <-served:
		logger.Error("serving failed", "err", serveErr)
	case <-ctx.Done():
	}
	g := grace()
	logger.Info("shutting down: running replies have the grace to finish, new requests are answered 503", "grace", g)
	// Keep accepting through the grace: a client that connects now is told to come back
	// (503, Retry-After) rather than refused, and a keep-alive connection is closed after its
	// next answer.
	gate.stopping.Store(true)
	srv.SetKeepAlivesEnabled(false)
	stopCtx, cancel := context.WithTimeout(context.Background(), g)
	defer cancel()
	if err := host.Close(stopCtx); err != nil {
		logger.Warn("replies cancelled at shutdown", "err", err)
	}
	// Every stream has ended, the cancelled ones with their terminal event: give the handlers a
	// moment to send what they hold, then drop what is left.
	lastCtx, cancelLast := context.WithTimeout(context.Background(), lastWordsTimeout)
	defer cancelLast()
	if srv.Shutdown(lastCtx) != nil {
		srv.Close()
	}
	if serveErr != nil {
		return fmt.Errorf("daemon: serve %s: %w", ln.Addr(), serveErr)
	}
	<-served // http.ErrServerClosed, now that Shutdown has run
	return nil
}

// stopGate passes requests to next until the server is stopping; from then on it answers them
// itself, 503 shutting_down, and /health with {"status":"stopping"}, each closing its connection.
type stopGate struct {
	next     http.Handler
	stopping atomic.Bool
}

func (g *stopGate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !g.stopping.Load() {
		g.next.ServeHTTP(w, r)
		return
	}
	// The body is not read: net/http reads it to its end before answering, for a client that
	// sent it whole, and a stopping server waits a moment at most for one that did not.
	w.Header().Set("Connection", "close")
	if r.ContentLength != 0 {
		http.NewResponseController(w).SetReadDeadline(time.Now().Add(lastWordsTimeout))
	}
	api.WriteStopping(w, r)
}
