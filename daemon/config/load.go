package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/knadh/koanf/parsers/toml/v2"
	"github.com/knadh/koanf/providers/confmap"
	"github.com/knadh/koanf/providers/env/v2"
	"github.com/knadh/koanf/providers/file"
	"github.com/knadh/koanf/v2"
	gotoml "github.com/pelletier/go-toml/v2"
)

// envPrefix starts every environment variable that sets a config key.
const envPrefix = "TFD_"

// Layer is one of the places a config value can come from, in rising precedence.
type Layer int

// The layers, lowest precedence first: a later layer overrides an earlier one key by key.
const (
	LayerDefault Layer = iota
	LayerFile
	LayerEnv
	LayerFlag
)

func (l Layer) String() string {
	switch l {
	case LayerDefault:
		return "default"
	case LayerFile:
		return "file"
	case LayerEnv:
		return "env"
	case LayerFlag:
		return "flag"
	}
	return fmt.Sprintf("Layer(%d)", int(l))
}

// Origin says where one effective value came from: the layer and, for a file, environment
// variable or flag, its name.
type Origin struct {
	Layer Layer
	Name  string // file path, variable name or flag ("--parallel"); empty for defaults
}

func (o Origin) String() string {
	if o.Name == "" {
		return o.Layer.String()
	}
	return o.Layer.String() + " " + o.Name
}

// Flag is one command-line flag that sets a config key.
type Flag struct {
	Name  string // as typed, e.g. "--parallel"
	Key   string // e.g. "sessions.parallel"
	Value string
}

// Sources are the layers above the defaults that [Load] reads.
type Sources struct {
	// File is the TOML file to read; empty: none.
	File string
	// FileRequired makes a missing File an error (the user named it); otherwise a missing file
	// is skipped and the defaults stand.
	FileRequired bool
	// Environ is the environment in os.Environ form; only TFD_* variables are read.
	Environ []string
	// Flags are the flags the user set, in any order.
	Flags []Flag
}

// Effective is a loaded, validated configuration and where each of its values came from.
type Effective struct {
	Config Config
	// Origins maps every key (e.g. "sessions.parallel") to the layer that set its value.
	Origins map[string]Origin
	// File is the config file that was read; empty when there was none.
	File string
	// Warnings are problems that did not stop the load, one line each: TFD_* environment
	// variables that name no config key. Whoever shows the config shows them.
	Warnings []string
}

// Load builds the configuration from the defaults, then src.File, then the TFD_*
// variables of src.Environ, then src.Flags, each overriding the one before key by key. It
// rejects unknown keys, values of the wrong type and invalid values, naming in each error the
// key, the value, where it came from and what is allowed; all problems are reported at once. A
// TFD_* variable that names no key is only a warning, in Effective.Warnings.
func Load(src Sources) (*Effective, error) {
	layers, err := readLayers(src)
	if err != nil {
		return nil, err
	}
	def := Default()
	schema := configFields(reflect.ValueOf(&def).Elem())
	eff := &Effective{Origins: make(map[string]Origin, len(schema))}
	if layers[1].k != nil {
		eff.File = src.File
	}
	merged := koanf.New(".")
	var problems []error
	for _, l := range layers {
		if l.k == nil {
			continue
		}
		for _, key := range l.k.Keys() {
			if _, known := schemaField(schema, key); !known {
				o := l.origin(key)
				if o.Layer == LayerEnv {
					// The environment is shared with everything else the user runs; a stray
					// variable there should not keep the service from starting.
					eff.Warnings = append(eff.Warnings, fmt.Sprintf("config: ignored the environment variable %s: it names no config key (%s is unknown; known keys: %s)", o.Name, key, knownKeys(schema, key)))
					continue
				}
				problems = append(problems, fmt.Errorf("config: unknown key %s (%s); known keys: %s", key, o, knownKeys(schema, key)))
				continue
			}
			eff.Origins[key] = l.origin(key)
			merged.Set(key, l.k.Get(key))
		}
	}
	cfg := Default()
	for _, f := range configFields(reflect.ValueOf(&cfg).Elem()) {
		if err := decodeValue(f.v, merged.Get(f.key)); err != nil {
			problems = append(problems, fmt.Errorf("config: %s = %s (%s): %w", f.key, showValue(merged.Get(f.key)), eff.Origins[f.key], err))
		}
	}
	if len(problems) == 0 { // validating values that did not decode would repeat their errors
		for _, p := range cfg.problems() {
			problems = append(problems, fmt.Errorf("config: %s = %s (%s): %s", p.key, showValue(merged.Get(p.key)), eff.Origins[p.key], p.want))
		}
	}
	if len(problems) > 0 {
		return nil, errors.Join(problems...)
	}
	eff.Config = cfg
	return eff, nil
}

// sourceLayer is one layer's keys and where each came from; k is nil for an absent layer.
type sourceLayer struct {
	k      *koanf.Koanf
	origin func(key string) Origin
}

// readLayers reads the four layers, lowest precedence first: defaults, file, env, flags.
func readLayers(src Sources) ([]sourceLayer, error) {
	def := Default()
	defaults := koanf.New(".")
	if err := defaults.Load(confmap.Provider(defaultMap(configFields(reflect.ValueOf(&def).Elem())), "."), nil); err != nil {
		return nil, fmt.Errorf("config: load defaults: %w", err)
	}
	fileLayer, err := loadFile(src)
	if err != nil {
		return nil, err
	}
	env, err := envLayer(src.Environ)
	if err != nil {
		return nil, err
	}
	flags, err := flagLayer(src.Flags)
	if err != nil {
		return nil, err
	}
	return []sourceLayer{
		{defaults, func(string) Origin { return Origin{Layer: LayerDefault} }},
		{fileLayer, func(string) Origin { return Origin{Layer: LayerFile, Name: src.File} }},
		env,
		flags,
	}, nil
}

// envLayer reads the TFD_* variables of environ.
func envLayer(environ []string) (sourceLayer, error) {
	names := map[string]string{} // key → the variable that set it
	provider := env.Provider(".", env.Opt{
		Prefix:      envPrefix,
		EnvironFunc: func() []string { return environ },
		TransformFunc: func(name, value string) (string, any) {
			key := envKey(name)
			names[key] = name
			return key, value
		},
	})
	k := koanf.New(".")
	if err := k.Load(provider, nil); err != nil {
		return sourceLayer{}, fmt.Errorf("config: read environment: %w", err)
	}
	return sourceLayer{k, func(key string) Origin { return Origin{Layer: LayerEnv, Name: names[key]} }}, nil
}

// flagLayer reads the flags the user set.
func flagLayer(flags []Flag) (sourceLayer, error) {
	names := map[string]string{}
	values := map[string]any{}
	for _, f := range flags {
		names[f.Key] = f.Name
		values[f.Key] = f.Value
	}
	k := koanf.New(".")
	if err := k.Load(confmap.Provider(values, "."), nil); err != nil {
		return sourceLayer{}, fmt.Errorf("config: read flags: %w", err)
	}
	return sourceLayer{k, func(key string) Origin { return Origin{Layer: LayerFlag, Name: names[key]} }}, nil
}

// loadFile reads src.File into its own layer; it returns nil when there is no file to read.
func loadFile(src Sources) (*koanf.Koanf, error) {
	if src.File == "" {
		return nil, nil
	}
	if _, err := os.Stat(src.File); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			if !src.FileRequired {
				return nil, nil
			}
			return nil, fmt.Errorf("config: the config file %s does not exist", src.File)
		}
		return nil, fmt.Errorf("config: %w", err)
	}
	k := koanf.New(".")
	if err := k.Load(file.Provider(src.File), toml.Parser()); err != nil {
		// koanf passes go-toml's error on as it is; its position is what an editor needs.
		var syntax *gotoml.DecodeError
		if errors.As(err, &syntax) {
			line, col := syntax.Position()
			return nil, fmt.Errorf("config: %s:%d:%d: %w: fix the TOML there", src.File, line, col, err)
		}
		return nil, fmt.Errorf("config: read %s: %w", src.File, err)
	}
	return k, nil
}

// envKey maps an environment variable's name to the config key it sets: the TFD_ prefix goes,
// the rest is lowercased, and the underscore after the section's name becomes a dot, so
// TFD_SESSIONS_PARALLEL sets sessions.parallel and TFD_PROMPT_CACHE_GIB sets prompt_cache.gib.
// A name that starts with no known section splits at its first underscore.
func envKey(name string) string {
	rest := strings.ToLower(strings.TrimPrefix(name, envPrefix))
	best := ""
	for _, s := range configSections() {
		if strings.HasPrefix(rest, s+"_") && len(s) > len(best) {
			best = s
		}
	}
	if best != "" {
		return best + "." + rest[len(best)+1:]
	}
	section, field, ok := strings.Cut(rest, "_")
	if !ok {
		return rest
	}
	return section + "." + field
}

// configField is one leaf of Config: its key and the settable value it decodes into.
type configField struct {
	key string
	v   reflect.Value
}

// configFields lists the leaves of the struct v (a Config) in declaration order, keyed by their
// koanf tags joined with dots.
func configFields(v reflect.Value) []configField {
	var out []configField
	t := v.Type()
	for i := range t.NumField() {
		section := t.Field(i).Tag.Get("koanf")
		sv := v.Field(i)
		for j := range sv.NumField() {
			out = append(out, configField{key: section + "." + sv.Type().Field(j).Tag.Get("koanf"), v: sv.Field(j)})
		}
	}
	return out
}

func schemaField(schema []configField, key string) (configField, bool) {
	for _, f := range schema {
		if f.key == key {
			return f, true
		}
	}
	return configField{}, false
}

// knownKeys lists the keys of key's section, or the sections when the section is unknown, to
// help with a typo.
func knownKeys(schema []configField, key string) string {
	section, _, _ := strings.Cut(key, ".")
	var same, sections []string
	seen := map[string]bool{}
	for _, f := range schema {
		s, _, _ := strings.Cut(f.key, ".")
		if s == section {
			same = append(same, f.key)
		}
		if !seen[s] {
			seen[s] = true
			sections = append(sections, "["+s+"]")
		}
	}
	if len(same) > 0 {
		return strings.Join(same, ", ")
	}
	return "sections " + strings.Join(sections, ", ")
}

// defaultMap flattens the schema's current values into key → value for the defaults layer.
func defaultMap(schema []configField) map[string]any {
	m := make(map[string]any, len(schema))
	for _, f := range schema {
		m[f.key] = f.v.Interface()
	}
	return m
}

var durationType = reflect.TypeFor[time.Duration]()

// decodeValue stores raw (as TOML, an environment variable or a flag gives it) into v, accepting
// strings for every type since environment variables and flags are strings.
func decodeValue(v reflect.Value, raw any) error {
	if v.Type() == durationType {
		d, err := toDuration(raw)
		if err != nil {
			return err
		}
		v.SetInt(int64(d))
		return nil
	}
	switch v.Kind() {
	case reflect.String:
		switch raw.(type) {
		case string, int64, float64, bool:
			v.SetString(fmt.Sprint(raw))
			return nil
		}
		return errors.New("want a string")
	case reflect.Int:
		n, err := toInt(raw)
		if err != nil {
			return err
		}
		v.SetInt(n)
	case reflect.Float64:
		x, err := toFloat(raw)
		if err != nil {
			return err
		}
		v.SetFloat(x)
	case reflect.Bool:
		b, ok := raw.(bool)
		if s, isString := raw.(string); isString {
			var err error
			if b, err = strconv.ParseBool(strings.TrimSpace(s)); err == nil {
				ok = true
			}
		}
		if !ok {
			return errors.New("want true or false")
		}
		v.SetBool(b)
	default:
		return fmt.Errorf("unsupported field type %s", v.Type())
	}
	return nil
}

func toInt(raw any) (int64, error) {
	switch x := raw.(type) {
	case int, int64:
		return reflect.ValueOf(x).Int(), nil
	case float64:
		if x == float64(int64(x)) {
			return int64(x), nil
		}
	case string:
		if n, err := strconv.ParseInt(strings.TrimSpace(x), 10, 64); err == nil {
			return n, nil
		}
	}
	return 0, errors.New("want a whole number")
}

func toFloat(raw any) (float64, error) {
	switch x := raw.(type) {
	case int, int64:
		return float64(reflect.ValueOf(x).Int()), nil
	case float64:
		return x, nil
	case string:
		if f, err := strconv.ParseFloat(strings.TrimSpace(x), 64); err == nil {
			return f, nil
		}
	}
	return 0, errors.New("want a number")
}

// toDuration reads a duration string ("15m", "90s") or a number of seconds.
func toDuration(raw any) (time.Duration, error) {
	switch x := raw.(type) {
	case time.Duration:
		return x, nil
	case string:
		s := strings.TrimSpace(x)
		if d, err := time.ParseDuration(s); err == nil {
			return d, nil
		}
		if secs, err := strconv.ParseFloat(s, 64); err == nil {
			return time.Duration(secs * float64(time.Second)), nil
		}
	case int, int64, float64:
		secs, _ := toFloat(x)
		return time.Duration(secs * float64(time.Second)), nil
	}
	return 0, errors.New(`want a duration such as "15m" or "90s", or a number of seconds`)
}

// showValue formats a raw value for an error message: strings quoted, the rest as Go prints them.
func showValue(raw any) string {
	if s, ok := raw.(string); ok {
		return strconv.Quote(s)
	}
	if raw == nil {
		return "(unset)"
	}
	return fmt.Sprint(raw)
}

// configSections returns the koanf names of Config's sections in declaration order.
func configSections() []string {
	t := reflect.TypeFor[Config]()
	out := make([]string, t.NumField())
	for i := range out {
		out[i] = t.Field(i).Tag.Get("koanf")
	}
	return out
}
