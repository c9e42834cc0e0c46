package scheduler

import (
	"bytes"
	"context"
	"log/slog"
	"math"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"tfd/batch"
)

// timedToy is the toy model on a clock: a forward of r rows takes 1 ms + 0.1 ms·r and a step of
// its MTP head 0.4 ms, on synctest's clock, so timings are exact.
type timedToy struct {
	*toyModel
	drafts int // the MTP head's steps
}

func (m *timedToy) Forward(ctx context.Context, rows []batch.Row) ([]float32, error) {
	time.Sleep(time.Millisecond + time.Duration(len(rows))*100*time.Microsecond)
	return m.toyModel.Forward(ctx, rows)
}

func (m *timedToy) Draft(ctx context.Context, rows []batch.DraftRow) ([]float32, error) {
	time.Sleep(400 * time.Microsecond)
	m.drafts++
	return make([]float32, m.vocab*len(rows)), nil
}

// TestCalibrateSeedsThePricer: a host started with Calibrate prices its first round by the line
// it timed (1 ms fixed, 0.1 ms a row), not by the 10:1 guess, logs the timings on one line, and
// its replies are the same as a host's that did not time anything.
func TestCalibrateSeedsThePricer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var log bytes.Buffer
		m := &timedToy{toyModel: newToy(32, 128)}
		h, err := NewShared(m, SharedOptions{Layout: []int{64, 64}, Calibrate: true, Drafter: m,
			Logger: slog.New(slog.NewTextHandler(&log, nil))})
		if err != nil {
			t.Fatal(err)
		}
		defer closeHost(t, h)
		fixed, perRow, _ := h.lane.pricer.line() // the lane has run no round: only NewShared wrote it
		if math.Abs(fixed-0.001) > 1e-9 || math.Abs(perRow-0.0001) > 1e-9 {
			t.Errorf("the pricer starts at %v s + %v s a row, want the timed 1 ms + 0.1 ms", fixed, perRow)
		}
		p := h.Priced()
		if !slices.Equal(p.Rows, []int{1, 2, 4}) || p.MTP != 400*time.Microsecond || m.drafts != 2 {
			t.Errorf("timed %v, MTP step %v after %d steps; want rows 1, 2, 4 (the toy's MaxRows) and 400µs after a warm step", p, p.MTP, m.drafts)
		}
		if want := `msg="priced rounds" rows=1:1.1ms,2:1.2ms,4:1.4ms mtp=400µs`; !strings.Contains(log.String(), want) {
			t.Errorf("log %q lacks %q", log.String(), want)
		}

		plain := NewSerial(newToy(32, 128), SharedOptions{})
		defer closeHost(t, plain)
		req := Request{Prompt: []int32{3, 1, 4, 1, 5}, MaxTokens: 40}
		events, _ := plain.Submit(context.Background(), req)
		want, _ := collect(t, events)
		events, _ = h.Submit(context.Background(), req)
		if got, _ := collect(t, events); !slices.Equal(got, want) {
			t.Errorf("after calibration the reply is %v, want %v", got, want)
		}
	})
}
