package consumer

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

func TestValidateOffsetCommit(t *testing.T) {
	g := NewGroup("g")
	// An admin commit to a group without members.
	if check, err := g.ValidateOffsetCommit("", nil, -1, false, 9); err != nil || check("t", 0) != nil {
		t.Fatalf("admin commit: %v", err)
	}
	g.put(&GroupMember{Member: Member{ID: "m", MemberEpoch: 7, PreviousMemberEpoch: 5, State: UnrevokedPartitions,
		Assigned: Partitions{"t": {0: 3, 1: 7}}, PendingRevocation: Partitions{"u": {0: 4}}}})

	for _, tc := range []struct {
		name     string
		member   string
		epoch    int32
		txn      bool
		version  int16
		want     error
		partWant map[[2]any]error // (topic, partition) → the check's error
	}{
		{name: "admin commit to a group with members", member: "", epoch: -1, version: 9, want: kerr.UnknownMemberID},
		{name: "transactional commit of a producer outside the group", member: "", epoch: -1, txn: true, version: 3},
		{name: "unknown member", member: "x", epoch: 7, version: 9, want: kerr.UnknownMemberID},
		{name: "old version", member: "m", epoch: 7, version: 8, want: kerr.UnsupportedVersion},
		{name: "newer epoch", member: "m", epoch: 8, version: 9, want: kerr.StaleMemberEpoch},
		{name: "current epoch: every partition", member: "m", epoch: 7, version: 9,
			partWant: map[[2]any]error{{"t", int32(0)}: nil, {"x", int32(9)}: nil}},
		{name: "older epoch: per partition", member: "m", epoch: 4, version: 9,
			partWant: map[[2]any]error{{"t", int32(0)}: nil, {"t", int32(1)}: kerr.StaleMemberEpoch,
				{"u", int32(0)}: nil, {"x", int32(0)}: kerr.StaleMemberEpoch}},
	} {
		check, err := g.ValidateOffsetCommit(tc.member, nil, tc.epoch, tc.txn, tc.version)
		if !errors.Is(err, tc.want) || (tc.want == nil && err != nil) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
			continue
		}
		for k, want := range tc.partWant {
			if got := check(k[0].(string), k[1].(int32)); !errors.Is(got, want) || (want == nil && got != nil) {
				t.Errorf("%s: %v: %v, want %v", tc.name, k, got, want)
			}
		}
	}
}

func TestValidateOffsetFetch(t *testing.T) {
	g := NewGroup("g")
	g.put(&GroupMember{Member: Member{ID: "m", MemberEpoch: 7}})
	m, x := "m", "x"
	for _, tc := range []struct {
		id    *string
		epoch int32
		want  error
	}{
		{nil, -1, nil}, {&m, 7, nil}, {&m, 6, kerr.StaleMemberEpoch}, {&x, 7, kerr.UnknownMemberID}, {nil, 7, kerr.UnknownMemberID},
	} {
		if err := g.ValidateOffsetFetch(tc.id, tc.epoch); !errors.Is(err, tc.want) || (tc.want == nil && err != nil) {
			t.Errorf("%v %d: %v, want %v", tc.id, tc.epoch, err, tc.want)
		}
	}
}
