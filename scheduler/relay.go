package scheduler

import "context"

// stream is a submitted request, the buffer its events wait in, and the channel its reader takes
// them from.
//
// The lane never blocks on a reader: it sends into events only while there is room (see
// active.room), and a relay goroutine passes them on to out at the reader's pace. When the relay
// takes an event out of a full buffer it wakes the lane, so a stream whose reader was behind
// rejoins the rounds without the lane ever polling for it.
type stream struct {
	ctx     context.Context
	req     Request
	events  chan Event  // lane → relay; eventBuffer deep
	out     chan Event  // relay → reader; closed after the terminal event
	unwatch func() bool // stops waking the lane when ctx ends

	look lookup // the prompt in the prompt cache; only the lane touches it
}

// eventBuffer is the room in a stream's buffer. A stream whose reader falls this far behind
// pauses (keeps its session, skips rounds) instead of blocking the lane; one slot always stays
// free for the terminal event, so ending a stream never blocks.
const eventBuffer = 32

// newStream makes the stream of req and starts its relay. wake is called when the lane may have
// something new to do for the stream: its reader made room, or its context ended.
func newStream(ctx context.Context, req Request, wake func()) *stream {
	st := &stream{ctx: ctx, req: req, events: make(chan Event, eventBuffer), out: make(chan Event)}
	st.unwatch = context.AfterFunc(ctx, wake)
	go st.relay(wake)
	return st
}

// relay passes events on to the reader until the terminal one, waking the lane each time it
// frees the buffer's last slot for a token.
func (st *stream) relay(wake func()) {
	defer close(st.out)
	for ev := range st.events {
		if len(st.events) == cap(st.events)-2 {
			wake() // the buffer was full: the lane may be waiting for this stream
		}
		st.out <- ev
	}
}

// finish delivers the terminal event of a stream that never took a session.
func (st *stream) finish(ev Event) {
	st.unwatch()
	st.events <- ev
	close(st.events)
}
