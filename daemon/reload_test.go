package daemon

import (
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"tfd/daemon/api"
	"tfd/daemon/config"
)

// TestApplyStallTimeout: a config reload that changes server.stall_timeout hands it to the
// serving Handler.
func TestApplyStallTimeout(t *testing.T) {
	h := &routingRecorder{}
	s := &server{logger: slog.New(slog.NewTextHandler(io.Discard, nil)), cur: &instance{handler: newFront(h)}}
	old, next := config.Default(), config.Default()
	next.Server.StallTimeout = 5 * time.Second
	routing, err := readRouting(next)
	if err != nil {
		t.Fatal(err)
	}
	s.applyRouting(old, next, routing, config.Diff(old, next), &reloadReport{})
	if len(h.set) != 1 || h.set[0].StallTimeout != 5*time.Second {
		t.Errorf("the Handler was given %+v, want one routing with a stall timeout of 5s", h.set)
	}
}

// routingRecorder is an apiHandler that records the routings it is given and serves nothing.
type routingRecorder struct{ set []api.Routing }

func (r *routingRecorder) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	http.Error(w, "not served", http.StatusNotFound)
}

func (r *routingRecorder) SetRouting(rt api.Routing) { r.set = append(r.set, rt) }
