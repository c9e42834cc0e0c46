package config

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// WriteTOML writes e's effective values to w as a TOML file, one section per table, each key
// followed by a comment saying where its value came from (default, file, env or flag). The
// output is a valid config file that reproduces e.Config.
func WriteTOML(w io.Writer, e *Effective) error {
	bw := bufio.NewWriter(w)
	if e.File != "" {
		fmt.Fprintf(bw, "# effective tfd config; file %s\n", e.File)
	} else {
		fmt.Fprintln(bw, "# effective tfd config; no config file")
	}
	cfg := e.Config
	fields := configFields(reflect.ValueOf(&cfg).Elem())
	for i := 0; i < len(fields); {
		section, _, _ := strings.Cut(fields[i].key, ".")
		j := i
		for j < len(fields) && strings.HasPrefix(fields[j].key, section+".") {
			j++
		}
		writeSection(bw, section, fields[i:j], e.Origins)
		i = j
	}
	return bw.Flush()
}

// writeSection writes one [section] with its keys, aligning the origin comments.
func writeSection(w io.Writer, section string, fields []configField, origins map[string]Origin) {
	lines := make([]string, len(fields))
	width := 0
	for i, f := range fields {
		_, name, _ := strings.Cut(f.key, ".")
		lines[i] = name + " = " + tomlValue(f.v)
		width = max(width, len(lines[i]))
	}
	fmt.Fprintf(w, "\n[%s]\n", section)
	for i, f := range fields {
		fmt.Fprintf(w, "%-*s  # %s\n", width, lines[i], origins[f.key])
	}
}

// tomlValue formats one config value as a TOML literal.
func tomlValue(v reflect.Value) string {
	if v.Type() == durationType {
		return tomlString(shortDuration(time.Duration(v.Int())))
	}
	switch v.Kind() {
	case reflect.String:
		return tomlString(v.String())
	case reflect.Int:
		return strconv.FormatInt(v.Int(), 10)
	case reflect.Float64:
		return strconv.FormatFloat(v.Float(), 'g', -1, 64)
	case reflect.Bool:
		return strconv.FormatBool(v.Bool())
	}
	return tomlString(fmt.Sprint(v.Interface()))
}

// tomlString quotes s as a TOML basic string; JSON's escapes are a subset of TOML's.
func tomlString(s string) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(s) // a string always encodes
	return strings.TrimSuffix(b.String(), "\n")
}

// shortDuration drops zero units from the end of d.String(): "15m" rather than "15m0s".
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
