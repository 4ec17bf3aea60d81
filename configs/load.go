package configs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

var durationType = reflect.TypeFor[time.Duration]()

// Set parses value as the type of key's field and stores it. Durations are
// Go durations ("10m", "168h") or a negative integer of nanoseconds ("-1"),
// which the keys that allow it read as unlimited or disabled; booleans are
// those of strconv.ParseBool. main uses it for the flags set on the command
// line.
func (c *Config) Set(key, value string) error {
	f, ok := c.field(key)
	if !ok {
		return fmt.Errorf("unknown key %q", key)
	}
	switch {
	case f.Type() == durationType:
		d, err := parseDuration(value)
		if err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
		f.SetInt(int64(d))
	case f.Kind() == reflect.String:
		f.SetString(value)
	case f.Kind() == reflect.Bool:
		b, err := strconv.ParseBool(strings.TrimSpace(value))
		if err != nil {
			return fmt.Errorf("%s: %q is not a boolean (true or false)", key, value)
		}
		f.SetBool(b)
	case f.Kind() == reflect.Int32:
		n, err := strconv.ParseInt(strings.TrimSpace(value), 10, 32)
		if err != nil {
			return fmt.Errorf("%s: %q is not a 32-bit integer", key, value)
		}
		f.SetInt(n)
	case f.Kind() == reflect.Int64:
		n, err := strconv.ParseInt(strings.TrimSpace(value), 10, 64)
		if err != nil {
			return fmt.Errorf("%s: %q is not an integer", key, value)
		}
		f.SetInt(n)
	case f.Kind() == reflect.Float64:
		n, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			return fmt.Errorf("%s: %q is not a number", key, value)
		}
		f.SetFloat(n)
	default:
		panic(fmt.Sprintf("configs: key %s has unsupported type %s", key, f.Type()))
	}
	return nil
}

// parseDuration reads a Go duration, or an integer, which must be negative
// ("-1"): a bare positive number is refused because its unit would be a guess.
// "0" is read as 0 for Validate to judge.
func parseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n > 0 {
			return 0, fmt.Errorf("%q has no unit; write a duration such as \"10s\", \"10m\" or \"168h\"", s)
		}
		return time.Duration(n), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration such as \"10s\", \"10m\" or \"168h\"", s)
	}
	return d, nil
}

// Load reads the YAML file at path over the defaults. Keys absent from the
// file keep their defaults; an unknown key is an error, as is more than one
// document. An empty file yields the defaults.
func Load(path string) (Config, error) {
	c := Default()
	b, err := os.ReadFile(path)
	if err != nil {
		return c, fmt.Errorf("config: %w", err)
	}
	if err := c.decodeYAML(b); err != nil {
		return c, fmt.Errorf("config %s: %w", path, err)
	}
	return c, nil
}

// decodeYAML applies the YAML document in b to c, checking every key.
func (c *Config) decodeYAML(b []byte) error {
	dec := yaml.NewDecoder(bytes.NewReader(b))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil // empty file
		}
		return err
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return errors.New("more than one YAML document")
	}
	if len(doc.Content) == 0 {
		return nil
	}
	root := doc.Content[0]
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		return nil // only comments
	}
	if root.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: the file must be a mapping of keys to values", root.Line)
	}
	var errs []error
	seen := make(map[string]bool)
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if seen[k.Value] {
			errs = append(errs, fmt.Errorf("line %d: key %q given twice", k.Line, k.Value))
			continue
		}
		seen[k.Value] = true
		f, ok := c.field(k.Value)
		if !ok {
			errs = append(errs, fmt.Errorf("line %d: %s", k.Line, unknownKey(k.Value)))
			continue
		}
		if v.Kind != yaml.ScalarNode {
			errs = append(errs, fmt.Errorf("line %d: %s: want a single value", v.Line, k.Value))
			continue
		}
		if v.Tag == "!!null" {
			if f.Kind() == reflect.String {
				f.SetString("") // "advertise:" with no value means empty
				continue
			}
			errs = append(errs, fmt.Errorf("line %d: %s: no value", v.Line, k.Value))
			continue
		}
		if err := c.Set(k.Value, v.Value); err != nil {
			errs = append(errs, fmt.Errorf("line %d: %w", v.Line, err))
		}
	}
	return errors.Join(errs...)
}

// ApplyEnv sets each key whose environment variable (EnvVar) getenv returns
// non-empty: getenv cannot tell an empty variable from an unset one, so
// every empty variable counts as unset. It returns every bad value at once.
func (c *Config) ApplyEnv(getenv func(string) string) error {
	return c.ApplyLookupEnv(func(name string) (string, bool) {
		v := getenv(name)
		return v, v != ""
	})
}

// ApplyLookupEnv sets each key whose environment variable (EnvVar) lookup
// (os.LookupEnv) finds set: non-empty, or empty for a key whose empty value
// means something (its emptyenv tag: admin_listen, advertise, listeners).
// An empty variable of any other key counts as unset, so an empty
// DISGW_LISTEN keeps the default rather than failing. It returns every bad
// value at once.
func (c *Config) ApplyLookupEnv(lookup func(string) (string, bool)) error {
	var errs []error
	for _, s := range settings {
		v, ok := lookup(s.Env)
		if !ok || v == "" && !s.EmptyEnv {
			continue
		}
		if err := c.Set(s.Key, v); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", s.Env, err))
		}
	}
	return errors.Join(errs...)
}

// otherEnv are the prefixes of DISGW_ variables that are no setting of
// disgw serve but are read elsewhere: disgw dislocal's, and the tests',
// benchmarks' and compatibility matrix's.
var otherEnv = []string{"DISGW_DISLOCAL_", "DISGW_TEST_", "DISGW_BENCH", "DISGW_COMPAT_", "DISGW_FAILPOINT_",
	"DISGW_HOSTILE_", "DISGW_DIFF_"}

// UnknownEnv returns a problem for each variable of environ (os.Environ's
// "NAME=value" form) named DISGW_ that is no setting's (EnvVar) nor one of
// the other variables disgw's commands and tests read: with the nearest
// setting's variable when it is close enough to be a typo, as unknown
// YAML keys get. disgw serve logs them as warnings: an environment can
// hold variables for other tools, so they do not fail the start.
func UnknownEnv(environ []string) []string {
	var out []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, EnvPrefix) || slices.ContainsFunc(otherEnv, func(p string) bool { return strings.HasPrefix(name, p) }) {
			continue
		}
		key := strings.ToLower(strings.TrimPrefix(name, EnvPrefix))
		if _, ok := byKey[key]; ok {
			continue
		}
		if k := suggestKey(key); k != "" {
			out = append(out, fmt.Sprintf("environment variable %s is no setting (did you mean %s?)", name, EnvVar(k)))
		} else {
			out = append(out, fmt.Sprintf("environment variable %s is no setting (docs/configuration.md lists every DISGW_ variable)", name))
		}
	}
	return out
}

// unknownKey is the problem of an unknown key name: with the nearest key
// when it is close enough to be a typo (suggestKey), else where the keys
// are listed.
func unknownKey(name string) string {
	if k := suggestKey(name); k != "" {
		return fmt.Sprintf("unknown key %q (did you mean %q?)", name, k)
	}
	return fmt.Sprintf("unknown key %q (configs/disgw.yaml and docs/configuration.md list every key)", name)
}

// suggestKey returns the key nearest to name by edit distance (Levenshtein,
// after lower-casing name and reading '-' and '.' as '_', so "admin-listen"
// and Kafka's dotted "log.level" find their keys), or "" when even the
// nearest is more than a third of its characters away. Ties go to the
// first key in Config's order.
func suggestKey(name string) string {
	norm := strings.Map(func(r rune) rune {
		if r == '-' || r == '.' {
			return '_'
		}
		return r
	}, strings.ToLower(name))
	best, bestD := "", -1
	for _, s := range settings {
		if d := editDistance(norm, s.Key); bestD < 0 || d < bestD {
			best, bestD = s.Key, d
		}
	}
	if bestD < 0 || 3*bestD > max(len(norm), len(best)) {
		return ""
	}
	return best
}

// editDistance is the Levenshtein distance of a and b, in bytes: the fewest
// single-byte insertions, deletions and substitutions that turn a into b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			sub := prev[j-1]
			if a[i-1] != b[j-1] {
				sub++
			}
			cur[j] = min(sub, prev[j]+1, cur[j-1]+1)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
