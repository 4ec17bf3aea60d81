package configs

import (
	"fmt"
	"time"
)

// Masked stands in for a secret's value in Effective.
const Masked = "******"

// Secret reports whether key holds a secret (its secret tag): never logged
// or shown.
func Secret(key string) bool { return byKey[key].Secret }

// KeyValue is one key of the effective configuration.
type KeyValue struct {
	Key, Value string
}

// Effective returns every key with its value as text, in the order of
// Config's fields (durations as Go durations); a set secret (dis_ak,
// dis_sk, dis_token) reads as Masked, an empty one as "".
func (c Config) Effective() []KeyValue {
	out := make([]KeyValue, 0, len(settings))
	for _, st := range settings {
		key := st.Key
		f := c.Value(st)
		var s string
		if d, ok := f.Interface().(time.Duration); ok {
			s = d.String()
		} else {
			s = fmt.Sprint(f.Interface())
		}
		if Secret(key) && s != "" {
			s = Masked
		}
		out = append(out, KeyValue{Key: key, Value: s})
	}
	return out
}
