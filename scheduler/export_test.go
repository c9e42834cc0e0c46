package scheduler

import "time"

// StillClock is a test hook for tests outside the package: it gives opts a clock that stands
// still, so that every forward seems to take no time. Rows then cost nothing pricing can see,
// and each decoding stream is granted every draft it proposes, whatever the machine's load: a
// test that counts drafts counts the same ones on a busy machine as on an idle one.
func StillClock(opts SharedOptions) SharedOptions {
	at := time.Now()
	opts.now = func() time.Time { return at }
	return opts
}
