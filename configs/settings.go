package configs

import (
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Setting is one setting as its Config field describes it (see Config for
// the tags). Its meaning, the field's doc comment, is read from the source
// by the generator (internal/settingsgen), not here.
type Setting struct {
	// Key is the YAML key, e.g. "max_frame_bytes".
	Key string
	// Field is the Config field, e.g. "MaxFrameBytes".
	Field string
	// Type is the field's type.
	Type reflect.Type
	// Env is the environment variable, e.g. "DISGW_MAX_FRAME_BYTES".
	Env string
	// Flag is serve's command-line flag without dashes; "" when none.
	Flag string
	// Default is the default as Set reads it; "" is the zero value.
	Default string
	// Range is the range tag as written, e.g. "> 0"; "" when none.
	Range string
	// Values are the values allowed; nil when any.
	Values []string
	// Check is the check tag as written (a name of checks, then optional
	// text); "" when none.
	Check string
	// CheckDoc says what the check allows, e.g. "HOST:PORT or empty".
	CheckDoc string
	// Unit is the unit of a number, e.g. "bytes"; "" when none.
	Unit string
	// Secret marks a credential, masked by Effective.
	Secret bool
	// EmptyEnv marks a key whose environment variable set to the empty
	// string sets it empty (its emptyenv tag); for other keys an empty
	// variable counts as unset.
	EmptyEnv bool
	// Gateway is the gateway tag: "" (the gateway.Config field named
	// Field, if there is one), "-" (no gateway.Config field) or the path of
	// the gateway.Config field, e.g. "Limits.MaxTopics".
	Gateway string

	index int
	rng   numRange
}

// settings are Config's fields read once; byKey indexes them.
var settings, byKey = readSettings()

// defaults is Default's value, set from the default tags once.
var defaults = readDefaults()

// Settings returns every setting, in the order of Config's fields.
func Settings() []Setting { return slices.Clone(settings) }

// Default returns the defaults of Config's default tags.
func Default() Config { return defaults }

// Keys returns every configuration key, in the order of Config's fields.
func Keys() []string {
	keys := make([]string, len(settings))
	for i, s := range settings {
		keys[i] = s.Key
	}
	return keys
}

// EnvVar returns the environment variable of key: DISGW_ and the key in
// upper case.
func EnvVar(key string) string { return EnvPrefix + strings.ToUpper(key) }

// Values returns the values key allows (its values tag); nil when any.
func Values(key string) []string {
	if s, ok := byKey[key]; ok {
		return slices.Clone(s.Values)
	}
	return nil
}

// Value returns the value of s's field in c.
func (c *Config) Value(s Setting) reflect.Value {
	return reflect.ValueOf(c).Elem().Field(s.index)
}

// GatewayField is the path of the gateway.Config field that s fills, given
// has, which reports whether gateway.Config has a field at a path: the
// path of s's gateway tag, which must exist, or else s's field name when
// gateway.Config has it; ok is false when s fills none. cmd/disgw maps a
// Config onto gateway.Config by this rule, and the generator writes the
// gateway's defaults of those fields by it.
func (s Setting) GatewayField(has func(path string) bool) (path string, ok bool, err error) {
	switch s.Gateway {
	case "-":
		return "", false, nil
	case "":
		return s.Field, has(s.Field), nil
	}
	if !has(s.Gateway) {
		return "", false, fmt.Errorf("configs.Config.%s: tag gateway:%q names no field of gateway.Config", s.Field, s.Gateway)
	}
	return s.Gateway, true, nil
}

// field returns the field of c named by key.
func (c *Config) field(key string) (reflect.Value, bool) {
	s, ok := byKey[key]
	if !ok {
		return reflect.Value{}, false
	}
	return c.Value(s), true
}

// readSettings reads the tags of Config's fields. A tag it cannot read
// panics: it is a mistake in this package, found by any test.
func readSettings() ([]Setting, map[string]Setting) {
	t := reflect.TypeFor[Config]()
	out := make([]Setting, 0, t.NumField())
	byKey := make(map[string]Setting, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		key, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		s := Setting{
			Key: key, Field: f.Name, Type: f.Type, Env: EnvVar(key), index: i,
			Flag: f.Tag.Get("flag"), Default: f.Tag.Get("default"), Range: f.Tag.Get("range"),
			Check: f.Tag.Get("check"), Unit: f.Tag.Get("unit"), Secret: f.Tag.Get("secret") == "true",
			EmptyEnv: f.Tag.Get("emptyenv") == "true", Gateway: f.Tag.Get("gateway"),
		}
		if v := f.Tag.Get("values"); v != "" {
			s.Values = strings.Split(v, ",")
		}
		if s.Range != "" {
			var err error
			if s.rng, err = parseRange(f.Type, s.Range); err != nil {
				panic(fmt.Sprintf("configs: Config.%s: range %q: %v", f.Name, s.Range, err))
			}
		}
		if s.Check != "" {
			name, _, _ := strings.Cut(s.Check, " ")
			c, ok := checks[name]
			if !ok {
				panic(fmt.Sprintf("configs: Config.%s: unknown check %q", f.Name, name))
			}
			s.CheckDoc = c.doc
		}
		if key == "" || byKey[key].Key != "" {
			panic(fmt.Sprintf("configs: Config.%s: missing or repeated yaml key %q", f.Name, key))
		}
		out = append(out, s)
		byKey[key] = s
	}
	return out, byKey
}

func readDefaults() Config {
	var c Config
	for _, s := range settings {
		if s.Default == "" {
			continue
		}
		if err := c.Set(s.Key, s.Default); err != nil {
			panic(fmt.Sprintf("configs: Config.%s: default: %v", s.Field, err))
		}
	}
	return c
}

// numRange is a range tag read: the value must be lo < v (op ">"),
// lo <= v (">=", "at least") or lo <= v <= hi ("to"), or negative when
// orNegative.
type numRange struct {
	op         string
	lo, hi     float64
	orNegative bool
}

// parseRange reads a range tag for a field of type t.
func parseRange(t reflect.Type, text string) (numRange, error) {
	w := strings.Fields(text)
	num := func(s string) (float64, error) { return parseNumber(t, strings.TrimSuffix(s, ",")) }
	var r numRange
	var err error
	var rest []string
	switch {
	case len(w) >= 2 && (w[0] == ">" || w[0] == ">="):
		r.op, rest = w[0], w[2:]
		r.lo, err = num(w[1])
	case len(w) >= 3 && w[0] == "at" && w[1] == "least":
		r.op, rest = ">=", w[3:]
		r.lo, err = num(w[2])
	case len(w) >= 3 && w[1] == "to":
		r.op, rest = "to", w[3:]
		if r.lo, err = num(w[0]); err == nil {
			r.hi, err = num(w[2])
		}
	default:
		return r, fmt.Errorf(`want "> X", ">= X", "at least X" or "X to Y"`)
	}
	r.orNegative = len(rest) >= 2 && rest[0] == "or" && strings.HasPrefix(rest[1], "-1")
	return r, err
}

// parseNumber reads s as a value of a field of type t.
func parseNumber(t reflect.Type, s string) (float64, error) {
	switch {
	case t == durationType:
		d, err := parseDuration(s)
		return float64(d), err
	case t.Kind() == reflect.Float64:
		return strconv.ParseFloat(s, 64)
	case t.Kind() == reflect.Int32 || t.Kind() == reflect.Int64:
		n, err := strconv.ParseInt(s, 10, 64)
		return float64(n), err
	}
	return 0, fmt.Errorf("a range needs a number, not %s", t)
}

// holds reports whether v is in r.
func (r numRange) holds(v float64) bool {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return false
	}
	if r.orNegative && v < 0 {
		return true
	}
	switch r.op {
	case ">":
		return v > r.lo
	case ">=":
		return v >= r.lo
	}
	return r.lo <= v && v <= r.hi
}

// A check is a single-field check a check tag names, for what a range or
// values tag cannot say.
type check struct {
	// doc says what the check allows, for the docs.
	doc string
	// problems returns the problems of v (each the text after "KEY: "),
	// none when v is valid.
	problems func(v reflect.Value) []string
}

// checks are the checks by name.
var checks = map[string]check{
	"hostport": {"HOST:PORT (port 0: a free port)",
		func(v reflect.Value) []string { return hostPortProblem(v.String(), false) }},
	"hostport-or-empty": {"HOST:PORT or empty", func(v reflect.Value) []string {
		if v.String() == "" {
			return nil
		}
		return hostPortProblem(v.String(), false)
	}},
	// An address clients can connect to: a host that is not unspecified and
	// a port 1-65535.
	"advertised": {"HOST:PORT or empty; never 0.0.0.0 or port 0", func(v reflect.Value) []string {
		if v.String() == "" {
			return nil
		}
		return hostPortProblem(v.String(), true)
	}},
	"directory": {"a directory", func(v reflect.Value) []string {
		if strings.TrimSpace(v.String()) == "" {
			return []string{"must name a directory"}
		}
		return nil
	}},
	"mechanisms": {"comma list of " + strings.Join(SASLMechanisms, ", "), func(v reflect.Value) []string {
		var out []string
		for _, m := range (Config{SASLEnabledMechanisms: v.String()}).EnabledSASLMechanisms() {
			if !slices.Contains(SASLMechanisms, m) {
				out = append(out, fmt.Sprintf("%q is not one of %s", m, strings.Join(SASLMechanisms, ", ")))
			}
		}
		return out
	}},
	"principals": {"`TYPE:NAME;...`", func(v reflect.Value) []string {
		var out []string
		for _, u := range (&Config{SuperUsers: v.String()}).SuperUserList() {
			if typ, name, ok := strings.Cut(u, ":"); !ok || typ == "" || name == "" {
				out = append(out, fmt.Sprintf("%q is not a principal TYPE:NAME such as User:admin (separate several with ';')", u))
			}
		}
		return out
	}},
	// Kafka keeps durations in milliseconds.
	"kafka-ms": {"0, -1, or at least 1ms", func(v reflect.Value) []string {
		if d := time.Duration(v.Int()); d > 0 && d < time.Millisecond {
			return []string{fmt.Sprintf("%v is below Kafka's unit of 1ms", d)}
		}
		return nil
	}},
}

func hostPortProblem(addr string, advertised bool) []string {
	if err := checkHostPort(addr, advertised); err != nil {
		return []string{fmt.Sprintf("%q: %v", addr, err)}
	}
	return nil
}

// checkSettings adds the problems of each setting on its own: its range,
// values and check tags.
func (c *Config) checkSettings(p *problems) {
	for _, s := range settings {
		v := c.Value(s)
		if s.Range != "" {
			var n float64
			if v.Kind() == reflect.Float64 {
				n = v.Float()
			} else {
				n = float64(v.Int())
			}
			if !s.rng.holds(n) {
				number := ""
				if v.Kind() == reflect.Float64 {
					number = "a number "
				}
				p.add(s.Key, "%v must be %s%s", v.Interface(), number, s.Range)
			}
		}
		if s.Values != nil && !slices.Contains(s.Values, v.String()) {
			p.add(s.Key, "%q is not one of %s", v.String(), strings.Join(s.Values, ", "))
		}
		if s.Check != "" {
			name, note, _ := strings.Cut(s.Check, " ")
			for _, msg := range checks[name].problems(v) {
				if note != "" {
					msg += " " + note
				}
				p.add(s.Key, "%s", msg)
			}
		}
	}
}
