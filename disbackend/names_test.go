package disbackend

import (
	"crypto/sha256"
	"encoding/hex"
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
		{strings.Repeat("x", 65), strings.Repeat("x", 47) + "-" + hash16(strings.Repeat("x", 65)), false},
		{"a." + strings.Repeat("x", 247), "a_" + strings.Repeat("x", 45) + "-" + hash16("a_"+strings.Repeat("x", 247)), false},
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
	if _, err := StreamNameForTopic(strings.Repeat("y", 250)); err == nil || !strings.Contains(err.Error(), "249") {
		t.Errorf("long name error does not name the limit: %v", err)
	}
	if PartitionID(7) != "shardId-0000000007" {
		t.Errorf("PartitionID(7) = %s", PartitionID(7))
	}
}

func hash16(topic string) string {
	sum := sha256.Sum256([]byte(topic))
	return hex.EncodeToString(sum[:8])
}

// TestStreamNameForTopicLong: names longer than 64 characters map to
// distinct valid DIS stream names of 64 characters, also when they share
// their first 64 characters; names of at most 64 keep '.' -> '_'.
func TestStreamNameForTopicLong(t *testing.T) {
	base := strings.Repeat("org.example.", 6) // 72 characters
	seen := map[string]string{}
	for _, topic := range []string{
		base[:65], base[:65] + "a", base[:65] + "b", base + strings.Repeat("z", 249-len(base)),
		base + strings.Repeat("z", 248-len(base)) + "y", strings.Repeat("q", 249), strings.Repeat(".", 249),
	} {
		name, err := StreamNameForTopic(topic)
		if err != nil {
			t.Fatalf("%d characters: %v", len(topic), err)
		}
		if len(name) != MaxStreamNameLen {
			t.Errorf("%q: stream name %q has %d characters, want %d", topic, name, len(name), MaxStreamNameLen)
		}
		for i := 0; i < len(name); i++ {
			if c := name[i]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				t.Fatalf("%q: stream name %q has %q", topic, name, c)
			}
		}
		if !strings.HasPrefix(name, strings.ReplaceAll(topic[:HashedStreamNamePrefixLen], ".", "_")+"-") {
			t.Errorf("%q: stream name %q lacks the readable prefix", topic, name)
		}
		if other, dup := seen[name]; dup {
			t.Errorf("%q and %q both map to %q", topic, other, name)
		}
		seen[name] = topic
		plain, err := PlainStreamNameForTopic(topic)
		if err != nil || plain != strings.ReplaceAll(topic, ".", "_") {
			t.Errorf("PlainStreamNameForTopic(%q) = %q, %v", topic, plain, err)
		}
	}
	// The example of docs/dis-backend.md, "Topic names and DIS stream names".
	if got, _ := StreamNameForTopic("com.example.payments.eu-west-1.settlement-batches.reconciliation-reports"); got != "com_example_payments_eu-west-1_settlement-batch-af9006bb08b646ca" {
		t.Errorf("README example maps to %q", got)
	}
	if got, _ := StreamNameFor(struct{}{}, base[:65]); got != HashedStreamName(base[:65]) {
		t.Errorf("StreamNameFor(non-namer) = %q, want the DIS mapping", got)
	}
	if got, _ := StreamNameFor(plainNamer{}, base[:65]); got != strings.ReplaceAll(base[:65], ".", "_") {
		t.Errorf("StreamNameFor(namer) = %q, want the namer's", got)
	}
}

type plainNamer struct{}

func (plainNamer) StreamNameForTopic(topic string) (string, error) {
	return PlainStreamNameForTopic(topic)
}

func TestAppNameForGroup(t *testing.T) {
	for _, g := range []string{"grp", "a.b", "a_b", "console-consumer-123", "with space/ü", strings.Repeat("x", 200), strings.Repeat(".", 70)} {
		name, err := AppNameForGroup(g)
		if err != nil {
			t.Fatalf("%q: %v", g, err)
		}
		if len(name) == 0 || len(name) > MaxAppNameLen {
			t.Fatalf("%q: name %q has length %d", g, name, len(name))
		}
		for i := 0; i < len(name); i++ {
			c := name[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				t.Fatalf("%q: name %q has %q", g, name, c)
			}
		}
		back, ok := GroupForAppName(name)
		if len(g)*3 <= MaxAppNameLen && (!ok || back != g) {
			t.Fatalf("%q: name %q reads back as %q %v", g, name, back, ok)
		}
	}
	a, _ := AppNameForGroup("a.b")
	b, _ := AppNameForGroup("a_b")
	if a == b {
		t.Fatalf("a.b and a_b map to the same app %q", a)
	}
	long1, _ := AppNameForGroup(strings.Repeat("x", 300) + "1")
	long2, _ := AppNameForGroup(strings.Repeat("x", 300) + "2")
	if long1 == long2 {
		t.Fatal("long group ids collide")
	}
	if _, err := AppNameForGroup(""); !errors.Is(err, ErrInvalidName) {
		t.Fatalf("empty group id: %v", err)
	}
}

func TestParsePartitionID(t *testing.T) {
	cases := []struct {
		id   string
		want int32
		ok   bool
	}{
		{"shardId-0000000000", 0, true},
		{"shardId-0000000003", 3, true},
		{"shardId-3", 3, true},
		{"3", 3, true},
		{"0000000012", 12, true},
		{"shardId-2147483647", 2147483647, true},
		{"shardId-2147483648", 0, false},
		{"shardId-00000000003", 0, false}, // 11 digits
		{"", 0, false},
		{"shardId-", 0, false},
		{"shardId-+3", 0, false},
		{"+3", 0, false},
		{"-1", 0, false},
		{"shardId--1", 0, false},
		{"shardid-3", 0, false},
		{"shardId-3 ", 0, false},
		{"shardId-0x1", 0, false},
		{"shardId-shardId-3", 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.id, func(t *testing.T) {
			got, ok := ParsePartitionID(tc.id)
			if ok != tc.ok || (ok && got != tc.want) {
				t.Errorf("ParsePartitionID(%q) = %d, %v; want %d, %v", tc.id, got, ok, tc.want, tc.ok)
			}
		})
	}
	for _, n := range []int32{0, 1, 7, 1000, 2147483647} {
		if got, ok := ParsePartitionID(PartitionID(n)); !ok || got != n {
			t.Errorf("ParsePartitionID(PartitionID(%d)) = %d, %v", n, got, ok)
		}
	}
}
