package scheduler

import (
	"fmt"
	"strings"
	"time"

	"tfd/batch"
)

// Priced is what a host measured at start for its pricer (SharedOptions.Calibrate): how long a
// forward of each number of rows took, and one step of the MTP head.
type Priced struct {
	Rows []int           // 1, 2, 4 … the model's MaxRows
	Took []time.Duration // the forward of Rows[i] rows took Took[i]
	// MTP is one draft step of the head after a forward of one row; 0 without a head. Rounds
	// are priced by rows; a chain of k drafts from the head costs k such steps.
	MTP time.Duration
}

// String writes the timings as one log value: "1:1.2ms,2:1.3ms,4:1.5ms".
func (p Priced) String() string {
	var b strings.Builder
	for i, r := range p.Rows {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%d:%s", r, p.Took[i].Round(time.Microsecond))
	}
	return b.String()
}

// calibrate times forwards of 1, 2, 4 … MaxRows rows, and a draft step when the model has a
// head, and seeds the pricer with them, so that the first rounds are priced by this machine's
// line rather than a guess. It runs before the lane starts, when no session holds a stream or
// kept tokens: the rows write keys and values only into free slots that any stream overwrites
// before it reads them (a stream reads only positions it fed itself), and nothing is sampled, so
// no reply's bits change. An untimed forward and draft come first: a first call pays for
// allocations, kernel loads and graph captures that no round pays again.
func (l *laneState) calibrate() (Priced, error) {
	var p Priced
	rows := l.scratchRows(l.h.model.MaxRows())
	if len(rows) == 0 {
		return p, nil
	}
	for i := logitLimit(l.h.model); i < len(rows); i++ {
		rows[i].Logits = false // a prompt's rows, which the rounds past logitLimit are
	}
	if _, err := l.timeForward(rows[:1]); err != nil {
		return p, err
	}
	if _, err := l.timeDraft(rows[0]); err != nil {
		return p, err
	}
	for r := 1; ; r = min(2*r, len(rows)) {
		took, err := l.timeForward(rows[:r])
		if err != nil {
			return p, err
		}
		p.Rows, p.Took = append(p.Rows, r), append(p.Took, took)
		l.pricer.observe(r, took)
		if r == 1 {
			if p.MTP, err = l.timeDraft(rows[0]); err != nil {
				return p, err
			}
		}
		if r == len(rows) {
			break
		}
	}
	l.pricer.seed()
	l.costs.head = p.MTP.Seconds()
	return p, nil
}

// timeForward runs one forward of rows and returns how long it took.
func (l *laneState) timeForward(rows []batch.Row) (time.Duration, error) {
	start := l.now()
	if _, err := l.h.model.Forward(l.h.hostCtx, rows); err != nil {
		return 0, fmt.Errorf("scheduler: time a forward of %d rows: %w", len(rows), err)
	}
	return l.now().Sub(start), nil
}

// timeDraft runs one step of the MTP head, if the model has one, over row, the first row of the
// last forward, and returns how long it took; 0 without a head.
func (l *laneState) timeDraft(row batch.Row) (time.Duration, error) {
	if l.drafter == nil {
		return 0, nil
	}
	draft := []batch.DraftRow{{Base: row.Base, Pos: row.Pos, Token: row.Token, Source: 0, Logits: true}}
	start := l.now()
	if _, err := l.drafter.Draft(l.h.hostCtx, draft); err != nil {
		return 0, fmt.Errorf("scheduler: time a step of the MTP head: %w", err)
	}
	return l.now().Sub(start), nil
}

// scratchRows lays out up to n rows over the free sessions that keep nothing, largest first, each
// row at the next position of its session, with token 0 and asking for logits as a draft's row
// does: a draft's row is what the pricer weighs.
func (l *laneState) scratchRows(n int) []batch.Row {
	var rows []batch.Row
	ss := l.pool.sessions
	for i := len(ss) - 1; i >= 0 && len(rows) < n; i-- {
		s := ss[i]
		if s.holder != nil || len(s.kept) > 0 {
			continue
		}
		for pos := 0; pos < min(s.capacity, l.h.model.Context()) && len(rows) < n; pos++ {
			rows = append(rows, batch.Row{Base: s.base, Pos: pos, Token: 0, Logits: true})
		}
	}
	return rows
}
