package daemon

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
)

// lastWordsTimeout bounds how long, after the grace, handlers have to send the terminal event of
// a cancelled reply before their connections are closed.
const lastWordsTimeout = 2 * time.Second

// Closer is what Serve needs of the host: scheduler.Host's Close.
type Closer interface {
	// Close stops admitting, lets running streams finish until ctx ends, then cancels the rest.
	Close(ctx context.Context) error
}

// Serve answers HTTP on ln with handler until ctx ends, then shuts down in order: it stops
// accepting connections, closes host so that running replies have up to grace() to finish (they
// are cancelled after, each with a terminal event), and waits for the handlers. It returns nil
// after a shutdown asked for by ctx, or the error that stopped serving. Either way ln and host
// are closed when it returns. grace is read when the shutdown begins.
func Serve(ctx context.Context, ln net.Listener, handler http.Handler, host Closer, grace func() time.Duration, logger *slog.Logger) error {
	srv := &http.Server{
		Handler:           handler,
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
	logger.Info("shutting down: running replies have the grace to finish", "grace", g)
	stopCtx, cancel := context.WithTimeout(context.Background(), g)
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := host.Close(stopCtx); err != nil {
			logger.Warn("replies cancelled at shutdown", "err", err)
		}
	})
	if err := srv.Shutdown(stopCtx); err != nil {
		// The grace is over and the host is cancelling what still runs: once every stream has
		// had its terminal event, give the handlers a moment to send it, then drop what is left.
		wg.Wait()
		lastCtx, cancelLast := context.WithTimeout(context.Background(), lastWordsTimeout)
		if srv.Shutdown(lastCtx) != nil {
			srv.Close()
		}
		cancelLast()
	}
	wg.Wait()
	if serveErr != nil {
		return fmt.Errorf("daemon: serve %s: %w", ln.Addr(), serveErr)
	}
	<-served // http.ErrServerClosed, now that Shutdown has run
	return nil
}

// ReadAPIKeys reads a keys file: one key a line; blank lines and lines starting with # are
// skipped. A file without keys is an error, since it would lock every client out.
func ReadAPIKeys(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("daemon: server.api_keys_file: %w", err)
	}
	defer f.Close()
	var keys []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line != "" && !strings.HasPrefix(line, "#") {
			keys = append(keys, line)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("daemon: read server.api_keys_file %s: %w", path, err)
	}
	if len(keys) == 0 {
		return nil, errors.New("daemon: server.api_keys_file " + path + " holds no keys: add one key a line, or set api_keys_file to \"\" for no authentication")
	}
	return keys, nil
}
