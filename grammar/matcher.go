package grammar

// Matcher is a grammar over a vocabulary: the token-level view a sampler needs. Its states are
// State values passed as any, so it satisfies an interface such as the scheduler's Constraint
// without this package knowing it. It is safe for concurrent use.
type Matcher struct {
	g *Grammar
	v *Vocab
}

// NewMatcher returns the matcher of g over v.
func NewMatcher(g *Grammar, v *Vocab) *Matcher { return &Matcher{g: g, v: v} }

// Start returns the State before the first token.
func (m *Matcher) Start() any { return m.g.Start() }

// Allowed sets in mask the tokens that may follow s (a State). mask must hold at least
// (v.Size()+63)/64 words; words past those are left as they are.
func (m *Matcher) Allowed(s any, mask []uint64) {
	m.v.Allowed(s.(State), mask[:(m.v.size+63)/64])
}

// Advance returns the State after token id, and false if its bytes may not follow s.
func (m *Matcher) Advance(s any, id int32) (any, bool) {
	next, ok := m.v.Advance(s.(State), id)
	return next, ok
}

// Accepting reports whether s ends a whole document.
func (m *Matcher) Accepting(s any) bool { return s.(State).Accepting() }
