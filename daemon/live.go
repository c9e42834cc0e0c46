package daemon

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"tfd/daemon/api"
	"tfd/daemon/metrics"
	"tfd/daemon/status"
)

// liveHandler is the HTTP handler of a running daemon. It serves /metrics and /v1/tfd/status
// itself (with an API key when keys are set: they tell the load and the config) and passes every
// other request to the current model's API Handler. A config reload swaps
// that Handler: requests already in the old one finish there (with the old model and host), new
// ones go to the new one. While a model switch drains the old model before loading the new one,
// new requests wait (until their context ends) and then go to the new model.
type liveHandler struct {
	metrics *metrics.Metrics
	status  func() status.Report
	keys    func() []string // the API keys in force; empty: none needed
	// bodyTimeout bounds the arrival of a body liveHandler does not read: the Handlers'.
	bodyTimeout time.Duration

	mu      sync.Mutex    // guards cur, resumed, down and closed
	cur     *front        // nil while a switch has paused admissions
	resumed chan struct{} // closed when admissions resume; nil while not paused
	down    error         // set when no model could be loaded: requests get 503 saying why
	closed  chan struct{} // closed at shutdown: paused requests are answered 503
}

// apiHandler is what the daemon needs of an API Handler (*api.Handler): to serve requests, and
// to take the routing of a reload.
type apiHandler interface {
	http.Handler
	SetRouting(api.Routing)
}

// front is an API Handler as the live handler hands requests to it: the requests it is serving
// are counted, so that a model switch can wait for them (see drain).
type front struct {
	apiHandler
	inflight sync.WaitGroup
}

func newFront(h apiHandler) *front { return &front{apiHandler: h} }

// newLiveHandler returns the live handler serving f, with bodyTimeout the Handlers' bound on a
// request body's arrival.
func newLiveHandler(f *front, m *metrics.Metrics, report func() status.Report, keys func() []string, bodyTimeout time.Duration) *liveHandler {
	return &liveHandler{cur: f, metrics: m, status: report, keys: keys, bodyTimeout: bodyTimeout, closed: make(chan struct{})}
}

func (l *liveHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/metrics", status.Path:
		l.boundUnread(w, r)
		if !api.Authorize(w, r, l.keys()) {
			return
		}
	}
	switch r.URL.Path {
	case "/metrics":
		l.metrics.Handler().ServeHTTP(w, r)
		return
	case status.Path:
		if r.Method != http.MethodGet {
			api.WriteMethodNotAllowed(w, r, http.MethodGet)
			return
		}
		api.WriteJSON(w, http.StatusOK, l.status())
		return
	}
	h, err := l.acquire(r.Context())
	if err != nil {
		l.boundUnread(w, r)
	}
	var down downError
	switch {
	case errors.As(err, &down):
		api.WriteNoModel(w, down.Error())
		return
	case err != nil:
		api.WriteShuttingDown(w)
		return
	}
	defer h.inflight.Done()
	h.ServeHTTP(w, r)
}

// boundUnread sets a read deadline for a body liveHandler answers without reading: net/http
// reads such a body to its end before it answers, so that the connection can serve the next
// request, and the Handler's deadline is not set on answers that do not pass through it. A
// client that sent part of a body and then nothing is answered, and its connection closed, when
// the deadline passes.
func (l *liveHandler) boundUnread(w http.ResponseWriter, r *http.Request) {
	if r.ContentLength != 0 {
		http.NewResponseController(w).SetReadDeadline(time.Now().Add(l.bodyTimeout)) // not every ResponseWriter supports it
	}
}

// acquire returns the current Handler with the request counted in its inflight group, waiting
// while a switch has paused admissions. It fails when ctx ends or the daemon stops first.
func (l *liveHandler) acquire(ctx context.Context) (*front, error) {
	for {
		l.mu.Lock()
		h, resumed, down := l.cur, l.resumed, l.down
		if h != nil {
			h.inflight.Add(1)
		}
		l.mu.Unlock()
		if down != nil {
			return nil, downError{down}
		}
		if h != nil {
			return h, nil
		}
		select {
		case <-resumed:
		case <-l.closed:
			return nil, context.Canceled
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// swap makes h the Handler for new requests and returns the previous one (nil if paused). It
// does not wait for the previous one's requests: see drain.
func (l *liveHandler) swap(h *front) *front {
	l.mu.Lock()
	defer l.mu.Unlock()
	old := l.cur
	l.cur, l.down = h, nil
	if l.resumed != nil {
		close(l.resumed)
		l.resumed = nil
	}
	return old
}

// pause stops handing requests to any Handler until swap, and returns the one that was current.
func (l *liveHandler) pause() *front {
	l.mu.Lock()
	defer l.mu.Unlock()
	old := l.cur
	l.cur = nil
	if l.resumed == nil {
		l.resumed = make(chan struct{})
	}
	return old
}

// fail answers every request, waiting or new, with 503 and err until the next swap.
func (l *liveHandler) fail(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.down = err
	if l.resumed != nil {
		close(l.resumed)
		l.resumed = nil
	}
}

// downError is acquire's error while no model is loaded.
type downError struct{ error }

// close answers requests waiting on a pause with 503; serve calls it at shutdown.
func (l *liveHandler) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case <-l.closed:
	default:
		close(l.closed)
	}
}

// drain waits until the requests h was serving when it stopped being current have ended.
func drain(h *front) {
	if h != nil {
		h.inflight.Wait()
	}
}
