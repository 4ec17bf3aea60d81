package configs

import (
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Every setting is described: a number has a unit, and the request caps'
// ranges end at MaxRequestEntries.
func TestSettingsDescribed(t *testing.T) {
	t.Parallel()
	for _, s := range Settings() {
		number := s.Type != reflect.TypeFor[time.Duration]() && s.Type.Kind() != reflect.String && s.Type.Kind() != reflect.Bool
		if number && s.Unit == "" {
			t.Errorf("Config.%s (key %s) is a number without a unit tag", s.Field, s.Key)
		}
	}
	for _, k := range []string{"max_request_topics", "max_request_partitions", "max_request_groups"} {
		if want := "1 to " + strconv.Itoa(MaxRequestEntries) + " "; !strings.HasPrefix(byKey[k].Range, want) {
			t.Errorf("%s: range %q, want it to start %q (MaxRequestEntries)", k, byKey[k].Range, want)
		}
	}
}

// A range tag allows what it says, and its problem quotes it.
func TestRangeTags(t *testing.T) {
	t.Parallel()
	tests := []struct {
		typ  reflect.Type
		tag  string
		ok   []float64
		fail []float64
	}{
		{reflect.TypeFor[int32](), "> 0", []float64{1, 1e9}, []float64{0, -1}},
		{reflect.TypeFor[int32](), ">= 1", []float64{1}, []float64{0}},
		{reflect.TypeFor[int64](), "at least 1024 (bytes)", []float64{1024}, []float64{1023, -1}},
		{reflect.TypeFor[int32](), "1 to 5242880 (5 MiB)", []float64{1, 5242880}, []float64{0, 5242881}},
		{reflect.TypeFor[time.Duration](), "at least 100ms (why)", []float64{float64(100 * time.Millisecond)}, []float64{float64(99 * time.Millisecond)}},
		{reflect.TypeFor[time.Duration](), "> 0, or -1 to disable it", []float64{1, -1, -5}, []float64{0}},
		{reflect.TypeFor[float64](), "> 0", []float64{0.5}, []float64{0, posInf(), nan()}},
	}
	for _, tc := range tests {
		r, err := parseRange(tc.typ, tc.tag)
		if err != nil {
			t.Fatalf("%q: %v", tc.tag, err)
		}
		for _, v := range tc.ok {
			if !r.holds(v) {
				t.Errorf("%q refuses %v", tc.tag, v)
			}
		}
		for _, v := range tc.fail {
			if r.holds(v) {
				t.Errorf("%q allows %v", tc.tag, v)
			}
		}
	}
	for _, bad := range []string{"positive", "> ten", "1 to"} {
		if _, err := parseRange(reflect.TypeFor[int32](), bad); err == nil {
			t.Errorf("range %q accepted", bad)
		}
	}
	c := Default()
	c.DISBatchBytes = 6 << 20
	want := "dis_batch_bytes: 6291456 must be 1 to 5242880 (5 MiB, DIS's limit for an ADVANCED stream)"
	if err := c.Validate(); err == nil || err.Error() != want {
		t.Errorf("Validate() = %v, want %s", err, want)
	}
}

func posInf() float64 { return math.Inf(1) }

func nan() float64 { return math.NaN() }
