package grammar

// stepObject handles an object with declared properties. They are written in declaration order;
// any may be left out but a required one, so the keys that may come next are those from the next
// index up to and including the first required one (limit). A key is matched byte by byte
// against those candidates: i is the lowest candidate whose key starts with what was written.
func (f frame) stepObject(b byte) (next, child frame, act action) {
	n := f.n
	switch f.ph {
	case phObjOpen, phObjValue:
		switch {
		case b == '}' && n.reqAfter[f.i] == int32(len(n.keys)):
			return f, child, complete
		case b == '"' && f.ph == phObjOpen && len(n.keys) > 0:
			f.ph, f.j = phObjKey, 1
			return f, child, stay
		case b == ',' && f.ph == phObjValue && int(f.i) < len(n.keys):
			f.ph = phObjComma
			return f, child, stay
		}
	case phObjComma:
		if b == '"' {
			f.ph, f.j = phObjKey, 1
			return f, child, stay
		}
	case phObjKey:
		key := n.keys[f.i]
		if int(f.j) == len(key) {
			if b != ':' {
				return f, child, fail
			}
			return frame{n: n, ph: phObjValue, i: f.i + 1}, frame{n: n.values[f.i], ph: phStart}, push
		}
		limit := min(int(n.reqAfter[f.i])+1, len(n.keys))
		for c := int(f.i); c < limit; c++ {
			k := n.keys[c]
			if len(k) > int(f.j) && k[f.j] == b && k[:f.j] == key[:f.j] {
				f.i, f.j = int32(c), f.j+1
				return f, child, stay
			}
		}
	}
	return f, child, fail
}

// stepAnyObject handles any JSON object: string keys, any values.
func (f frame) stepAnyObject(b byte) (next, child frame, act action) {
	switch {
	case b == '}' && (f.ph == phAnyOpen || f.ph == phAnyValue):
		return f, child, complete
	case b == '"' && (f.ph == phAnyOpen || f.ph == phAnyComma):
		return frame{n: f.n, ph: phAnyKey}, frame{n: anyString, ph: phStrBody}, push
	case b == ':' && f.ph == phAnyKey:
		return frame{n: f.n, ph: phAnyValue}, frame{n: anyValue, ph: phStart}, push
	case b == ',' && f.ph == phAnyValue:
		f.ph = phAnyComma
		return f, child, stay
	}
	return f, child, fail
}

// stepArray handles an array whose length is bounded by minItems and maxItems; i counts the items
// written.
func (f frame) stepArray(b byte) (next, child frame, act action) {
	n := f.n
	switch f.ph {
	case phArrOpen:
		if b == ']' && n.minItems == 0 {
			return f, child, complete
		}
		if n.maxItems != 0 {
			return frame{n: n, ph: phArrValue, i: 1}, frame{n: n.items, ph: phStart}, pushFeed
		}
	case phArrValue:
		switch {
		case b == ']' && int(f.i) >= n.minItems:
			return f, child, complete
		case b == ',' && (n.maxItems < 0 || int(f.i) < n.maxItems):
			f.ph = phArrComma
			return f, child, stay
		}
	case phArrComma:
		return frame{n: n, ph: phArrValue, i: f.i + 1}, frame{n: n.items, ph: phStart}, pushFeed
	}
	return f, child, fail
}
