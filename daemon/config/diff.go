package config

import "reflect"

// Change is one setting whose value differs between two configs: its key ("sessions.parallel")
// and both values as the TOML file writes them.
type Change struct{ Key, From, To string }

func (c Change) String() string { return c.Key + " " + c.From + " → " + c.To }

// Diff lists the settings whose values differ between a and b, in schema order.
func Diff(a, b Config) []Change {
	fa := configFields(reflect.ValueOf(&a).Elem())
	fb := configFields(reflect.ValueOf(&b).Elem())
	var out []Change
	for i := range fa {
		if !reflect.DeepEqual(fa[i].v.Interface(), fb[i].v.Interface()) {
			out = append(out, Change{fa[i].key, tomlValue(fa[i].v), tomlValue(fb[i].v)})
		}
	}
	return out
}
