package disbackend

import (
	"errors"
	"strings"
	"testing"
)

func TestStreamNameForTopic(t *testing.T) {
	cases := []struct {
		topic, stream string
		bad           bool
	}{
		{"orders.v1", "orders_v1", false},
		{"a_b", "a_b", false},
		{"A-z.0", "A-z_0", false},
		{strings.Repeat("x", 64), strings.Repeat("x", 64), false},
		{strings.Repeat("x", 65), "", true},
		{"", "", true},
		{".", "", true},
		{"..", "", true},
		{"with space", "", true},
		{"ümlaut", "", true},
		{strings.Repeat("y", 250), "", true},
	}
	for _, tc := range cases {
		got, err := StreamNameForTopic(tc.topic)
		if tc.bad {
			if !errors.Is(err, ErrInvalidName) {
				t.Errorf("%q: err %v, want ErrInvalidName", tc.topic, err)
			}
			continue
		}
		if err != nil || got != tc.stream {
			t.Errorf("%q: %q %v, want %q", tc.topic, got, err, tc.stream)
		}
	}
	if _, err := StreamNameForTopic(strings.Repeat("x", 65)); err == nil || !strings.Contains(err.Error(), "64") {
		t.Errorf("long name error does not name the limit: %v", err)
	}
	if PartitionID(7) != "shardId-0000000007" {
		t.Errorf("PartitionID(7) = %s", PartitionID(7))
	}
}
