package grammar

// phase is where a frame is inside its node's value.
type phase uint8

const (
	phStart phase = iota // before the value's first byte
	phDone               // the whole document is written: nothing may follow

	phStrBody // inside a string, between characters
	phStrEsc  // after a backslash
	phStrHex  // inside \uXXXX: i hex digits left
	phStrUTF  // inside a multi-byte UTF-8 character: i bytes left, the next in [j>>8, j&0xff]

	phObjOpen  // kObject after '{': i is the next property index (0)
	phObjKey   // kObject inside a key: i is the lowest property still matching, j the bytes matched
	phObjValue // kObject after a value: i is the next property index
	phObjComma // kObject after ',': i is the next property index

	phAnyOpen  // kAnyObject after '{'
	phAnyKey   // kAnyObject after a key: ':' must follow
	phAnyValue // kAnyObject after a value
	phAnyComma // kAnyObject after ','

	phArrOpen  // kArray after '[': i items so far (0)
	phArrValue // kArray after an item: i items so far
	phArrComma // kArray after ',': i items so far

	phNumMinus // after a leading '-'
	phNumZero  // after a leading 0 (terminal)
	phNumInt   // in the integer digits (terminal)
	phNumDot   // after '.'
	phNumFrac  // in the fraction digits (terminal)
	phNumE     // after 'e' or 'E'
	phNumSign  // after the exponent's sign
	phNumExp   // in the exponent digits (terminal)

	phLit // kLiteral, kTagged: at node i of the literal trie
	phSeq // kSeq: parts before i are written
)

// frame is the innermost value being written: its node, its phase and two counters whose meaning
// depends on the phase.
type frame struct {
	n    *node
	ph   phase
	i, j int32
}

// cell is one frame of the stack below the top, immutable once made.
type cell struct {
	f  frame
	up *cell
}

// State is a position in a grammar: what has been written so far, as far as what may follow is
// concerned. The zero State accepts nothing; Grammar.Start returns the first one.
type State struct {
	top frame
	up  *cell
}

// action is what a frame does with a byte.
type action uint8

const (
	fail     action = iota // the byte may not come here
	stay                   // consumed: the top frame becomes next
	complete               // consumed: the value is finished, the frame below resumes
	ended                  // not consumed: the value ended before the byte; feed it to the frame below
	push                   // consumed: next (the parent, moved on) goes below, child becomes the top
	pushFeed               // not consumed: as push, then feed the byte to child
)

// Step returns the state after b, and false (with s unchanged) when b may not follow s.
func (s State) Step(b byte) (State, bool) {
	for {
		next, child, act := s.top.step(b)
		switch act {
		case stay:
			s.top = next
			return s, true
		case complete:
			return s.pop(), true
		case ended:
			s = s.pop()
		case push:
			s.up, s.top = &cell{next, s.up}, child
			return s, true
		case pushFeed:
			s.up, s.top = &cell{next, s.up}, child
		default:
			return State{}, false
		}
	}
}

// StepBytes returns the state after all of p, and false when some byte of p may not follow.
func (s State) StepBytes(p []byte) (State, bool) {
	ok := true
	for _, b := range p {
		if s, ok = s.Step(b); !ok {
			return State{}, false
		}
	}
	return s, ok
}

// Accepting reports whether what has been written is a whole document: the top value may end
// here, and so may every one it is nested in.
func (s State) Accepting() bool {
	if s.top.ph == phDone {
		return true
	}
	if !s.top.terminal() {
		return false
	}
	for c := s.up; c != nil; c = c.up {
		if !c.f.terminal() {
			return false
		}
	}
	return true
}

// pop finishes the top frame's value and resumes the frame below it; after the outermost value,
// the document is done.
func (s State) pop() State {
	if s.up == nil {
		return State{top: frame{ph: phDone}}
	}
	return State{top: s.up.f, up: s.up.up}
}

// inString reports whether s is between the characters of a string, where every token made of
// plain string characters is allowed and leaves s as it is.
func (s State) inString() bool { return s.top.ph == phStrBody }

// terminal reports whether the frame's value may end here though more bytes could extend it: a
// number after a digit, or a literal that is a prefix of a longer one.
func (f frame) terminal() bool {
	switch f.ph {
	case phNumZero, phNumInt, phNumFrac, phNumExp:
		return true
	case phLit:
		return f.n.kind == kLiteral && f.n.lit[f.i].term
	case phSeq:
		return int(f.i) == len(f.n.parts)
	}
	return false
}

// step applies one byte to the frame.
func (f frame) step(b byte) (next, child frame, act action) {
	switch f.ph {
	case phStart:
		return start(f.n, b)
	case phStrBody, phStrEsc, phStrHex, phStrUTF:
		return f.stepString(b)
	case phObjOpen, phObjKey, phObjValue, phObjComma:
		return f.stepObject(b)
	case phAnyOpen, phAnyKey, phAnyValue, phAnyComma:
		return f.stepAnyObject(b)
	case phArrOpen, phArrValue, phArrComma:
		return f.stepArray(b)
	case phLit:
		return f.stepLiteral(b)
	case phSeq:
		if int(f.i) == len(f.n.parts) {
			return f, child, ended
		}
		return frame{n: f.n, ph: phSeq, i: f.i + 1}, frame{n: f.n.parts[f.i], ph: phStart}, pushFeed
	case phNumMinus, phNumZero, phNumInt, phNumDot, phNumFrac, phNumE, phNumSign, phNumExp:
		return f.stepNumber(b)
	}
	return f, f, fail // phDone
}

// start begins a value of n with its first byte b.
func start(n *node, b byte) (next, child frame, act action) {
	n = resolve(n, b)
	if n == nil {
		return next, child, fail
	}
	switch n.kind {
	case kObject:
		if b == '{' {
			return frame{n: n, ph: phObjOpen}, child, stay
		}
	case kAnyObject:
		if b == '{' {
			return frame{n: n, ph: phAnyOpen}, child, stay
		}
	case kArray:
		if b == '[' {
			return frame{n: n, ph: phArrOpen}, child, stay
		}
	case kString:
		if b == '"' {
			return frame{n: n, ph: phStrBody}, child, stay
		}
	case kNumber, kInteger:
		switch {
		case b == '-':
			return frame{n: n, ph: phNumMinus}, child, stay
		case b == '0':
			return frame{n: n, ph: phNumZero}, child, stay
		case isDigit(b):
			return frame{n: n, ph: phNumInt}, child, stay
		}
	case kLiteral, kTagged:
		return frame{n: n, ph: phLit}.stepLiteral(b)
	case kSeq:
		return frame{n: n, ph: phSeq}.step(b)
	}
	return next, child, fail
}

// stepString handles the inside of a string: escapes, and UTF-8 that is well formed.
func (f frame) stepString(b byte) (next, child frame, act action) {
	switch f.ph {
	case phStrBody:
		switch {
		case b == '"':
			return f, child, complete
		case b == '\\':
			f.ph = phStrEsc
		case b < 0x20:
			return f, child, fail
		case b < 0x80:
		default:
			need, lo, hi := utf8Lead(b)
			if need == 0 {
				return f, child, fail
			}
			f.ph, f.i, f.j = phStrUTF, need, int32(lo)<<8|int32(hi)
		}
	case phStrEsc:
		switch b {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			f.ph = phStrBody
		case 'u':
			f.ph, f.i = phStrHex, 4
		default:
			return f, child, fail
		}
	case phStrHex:
		if !isHex(b) {
			return f, child, fail
		}
		if f.i--; f.i == 0 {
			f.ph = phStrBody
		}
	case phStrUTF:
		if int32(b) < f.j>>8 || int32(b) > f.j&0xff {
			return f, child, fail
		}
		if f.i--; f.i == 0 {
			f.ph = phStrBody
		}
		f.j = 0x80<<8 | 0xbf
	}
	return f, child, stay
}

// utf8Lead returns how many continuation bytes follow the lead byte b of a well-formed UTF-8
// character, and the range of the first of them (Unicode's table 3-7); need is 0 for a byte that
// cannot lead.
func utf8Lead(b byte) (need int32, lo, hi byte) {
	switch {
	case b >= 0xc2 && b <= 0xdf:
		return 1, 0x80, 0xbf
	case b == 0xe0:
		return 2, 0xa0, 0xbf
	case b == 0xed:
		return 2, 0x80, 0x9f
	case b >= 0xe1 && b <= 0xef:
		return 2, 0x80, 0xbf
	case b == 0xf0:
		return 3, 0x90, 0xbf
	case b >= 0xf1 && b <= 0xf3:
		return 3, 0x80, 0xbf
	case b == 0xf4:
		return 3, 0x80, 0x8f
	}
	return 0, 0, 0
}

// stepLiteral follows the literal trie; a byte off the trie ends the literal if a text ends here.
// A kTagged node's texts are never prefixes of one another: once one is written, the node tagged
// to it takes the frame's place.
func (f frame) stepLiteral(b byte) (next, child frame, act action) {
	at := &f.n.lit[f.i]
	for _, e := range at.next {
		if e.b != b {
			continue
		}
		to := &f.n.lit[e.to]
		switch {
		case f.n.kind == kTagged && to.term:
			return frame{n: f.n.tagged[to.text], ph: phStart}, child, stay
		case len(to.next) == 0:
			return f, child, complete
		}
		f.i = e.to
		return f, child, stay
	}
	if at.term && f.n.kind == kLiteral {
		return f, child, ended
	}
	return f, child, fail
}

// stepNumber follows JSON's number grammar; kInteger stops before a fraction or exponent.
func (f frame) stepNumber(b byte) (next, child frame, act action) {
	real := f.n.kind == kNumber
	switch {
	case isDigit(b) && (f.ph == phNumMinus || f.ph == phNumInt):
		if f.ph == phNumMinus && b == '0' {
			f.ph = phNumZero
		} else {
			f.ph = phNumInt
		}
		return f, child, stay
	case isDigit(b) && (f.ph == phNumDot || f.ph == phNumFrac):
		f.ph = phNumFrac
		return f, child, stay
	case isDigit(b) && (f.ph == phNumE || f.ph == phNumSign || f.ph == phNumExp):
		f.ph = phNumExp
		return f, child, stay
	case real && b == '.' && (f.ph == phNumZero || f.ph == phNumInt):
		f.ph = phNumDot
		return f, child, stay
	case real && (b == 'e' || b == 'E') && (f.ph == phNumZero || f.ph == phNumInt || f.ph == phNumFrac):
		f.ph = phNumE
		return f, child, stay
	case (b == '+' || b == '-') && f.ph == phNumE:
		f.ph = phNumSign
		return f, child, stay
	case f.terminal():
		return f, child, ended
	}
	return f, child, fail
}
