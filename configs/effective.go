package configs

import (
	"fmt"
	"reflect"
	"time"
)

// Masked stands in for a secret's value in Effective.
const Masked = "******"

// secretKeys are the keys whose values Effective masks.
var secretKeys = map[string]bool{"dis_ak": true, "dis_sk": true, "dis_token": true}

// Secret reports whether key holds a secret (never logged or shown).
func Secret(key string) bool { return secretKeys[key] }

// KeyValue is one key of the effective configuration.
type KeyValue struct {
	Key, Value string
}

// Effective returns every key with its value as text, in the order of
// Config's fields (durations as Go durations); a set secret (dis_ak,
// dis_sk, dis_token) reads as Masked, an empty one as "".
func (c Config) Effective() []KeyValue {
	v := reflect.ValueOf(c)
	t := v.Type()
	out := make([]KeyValue, 0, t.NumField())
	for i := range t.NumField() {
		key := yamlKey(t.Field(i))
		f := v.Field(i)
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
