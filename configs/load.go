package configs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
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
			errs = append(errs, fmt.Errorf("line %d: unknown key %q (known keys: %s)", k.Line, k.Value, strings.Join(Keys(), ", ")))
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
// non-empty. It returns every bad value at once.
func (c *Config) ApplyEnv(getenv func(string) string) error {
	var errs []error
	for _, k := range Keys() {
		name := EnvVar(k)
		v := getenv(name)
		if v == "" {
			continue
		}
		if err := c.Set(k, v); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}
