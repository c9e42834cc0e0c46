package scheduler

import "time"

// What a drafted forward costs the host beyond its rows. The pricer weighs a draft by the row it
// adds to the forward; where the drafts are made and verified on the host (every path but a
// greedy chain on the device) a draft costs more: the pick of the row after it, and for the MTP
// head's drafts a call of the head that waits for its logits and the draft's own pick. On the
// H200 a sampled stream of the bundled model paid about as much for that call as for a forward,
// and drafts it could not pay for made it slower than drafts off; a sampled pick over a vocabulary
// of 151,936 costs milliseconds. So the lane times both as it goes and prices them too.

// hostCosts are the host's own costs around a forward, in seconds, learnt from the rounds run:
// head is one call of the MTP head that asks for logits (its launch, the wait for it, its logits
// read back; seeded by Calibrate's step of the head), pick[k] one row's pick of a token by a
// greedy stream (k = 0: the argmax) or a sampled one (k = 1: the keyed draw's filters and noise).
type hostCosts struct {
	head float64
	pick [2]float64
}

// costWeight is how much each new timing moves a running figure: about the last ten decide.
const costWeight = 0.1

// note folds the timing d into the running figure x; the first timing sets it.
func note(x *float64, d time.Duration) {
	if *x == 0 {
		*x = d.Seconds()
		return
	}
	*x += costWeight * (d.Seconds() - *x)
}

// picks returns which of hostCosts.pick and of the lane's landing figures a stream's rows take:
// 0 for a greedy stream, 1 for a sampled one, whose drafts also land less often.
func picks(a *active) int {
	if a.req.Sampling.Greedy() {
		return 0
	}
	return 1
}

// maxHeadWait bounds how many priced rounds a stream whose head's next draft did not pay waits
// before the head chains one deeper again to try it.
const maxHeadWait = 64

// paceHead sets how deep the MTP head may chain for a after a priced round in which it was
// granted a.granted drafts and, if refused, pricing refused the head's next one (chainDepth). A
// head whose drafts all paid may chain one deeper, so that the grant can grow; one refused chains
// only what was granted and waits 1, 3, 7 … priced rounds (up to maxHeadWait) before it tries one
// deeper again, so that a draft that does not pay is not made every round.
func (a *active) paceHead(refused bool) {
	a.headRefused = refused
	switch {
	case refused:
		a.headBackoff = min(2*a.headBackoff+1, maxHeadWait)
		a.headWait, a.headCap = a.headBackoff, a.granted
	case a.headWait > 1:
		a.headWait--
		a.headCap = a.granted
	case a.headWait == 1: // the wait is over: try one deeper
		a.headWait, a.headCap = 0, a.granted+1
	default: // the head's drafts paid, the one deeper it tried included
		a.headBackoff, a.headCap = 0, a.granted+1
	}
}
