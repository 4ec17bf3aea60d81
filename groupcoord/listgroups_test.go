package groupcoord

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// listed is ListGroups' answer as group → "state/protocol type".
func (h *harness) listed(req *kmsg.ListGroupsRequest) map[string]string {
	h.t.Helper()
	r := h.c.ListGroups(h.ctx, req)
	if r.ErrorCode != 0 {
		h.t.Fatalf("ListGroups: error %d", r.ErrorCode)
	}
	out := map[string]string{}
	for _, g := range r.Groups {
		out[g.Group] = g.GroupState + "/" + g.ProtocolType
	}
	return out
}

func sameListing(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %v, want %v", what, got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("%s: %v, want %v", what, got, want)
		}
	}
}

// TestListGroupsProtocolType: ListGroups shows each group's protocol type
// in every state as Kafka 4.4 answers (checked against it): "consumer" for
// Stable, PreparingRebalance, CompletingRebalance, and Empty after its
// members left (with or without offsets; the latter until the retention
// sweep, as Kafka's cleanup); "" for a group that only committed offsets.
// The states filter (v4+) and types filter (v5) match case-insensitively;
// no group is of type "consumer". The type survives a restart; DescribeGroups
// shows the same; DeleteGroups deletes an Empty group without offsets.
func TestListGroupsProtocolType(t *testing.T) {
	h := newHarness(t)
	apps := &statesApps{memApps: h.apps, states: map[string][]byte{}}
	h.restart(apps)
	if code := commitCode(h, "offsets-only", "", -1); code != 0 {
		t.Fatalf("commit: %d", code)
	}
	leave := func(group string, ids []string) {
		t.Helper()
		var ms []kmsg.LeaveGroupRequestMember
		for _, id := range ids {
			lm := kmsg.NewLeaveGroupRequestMember()
			lm.MemberID = id
			ms = append(ms, lm)
		}
		if r := h.c.LeaveGroup(h.ctx, group, ms); r.ErrorCode != 0 {
			t.Fatalf("leave %s: %+v", group, r)
		}
		h.flush()
	}
	ids, _ := h.stableGroup("left", 1)
	leave("left", ids)
	ids, gen := h.stableGroup("left-with-offsets", 1)
	if code := commitCode(h, "left-with-offsets", ids[0], gen); code != 0 {
		t.Fatalf("commit: %d", code)
	}
	leave("left-with-offsets", ids)
	stable, stableGen := h.stableGroup("stable", 1)
	ids, _ = h.stableGroup("completing", 1)
	h.recvJoin(h.joinAsync(joinReq{group: "completing", member: ids[0], protocols: protos("range", "changed")}))
	h.heartbeat("stable", stable[0], stableGen, nil)
	h.stableGroup("preparing", 1)
	h.newMember(joinReq{group: "preparing"})
	h.heartbeat("stable", stable[0], stableGen, nil)
	h.flush()

	all := map[string]string{
		"offsets-only": "Empty/", "stable": "Stable/consumer", "left": "Empty/consumer",
		"left-with-offsets": "Empty/consumer", "completing": "CompletingRebalance/consumer",
		"preparing": "PreparingRebalance/consumer",
	}
	sameListing(t, "v5", h.listed(&kmsg.ListGroupsRequest{Version: 5}), all)
	sameListing(t, "types classic", h.listed(&kmsg.ListGroupsRequest{Version: 5, TypesFilter: []string{"Classic"}}), all)
	sameListing(t, "types consumer", h.listed(&kmsg.ListGroupsRequest{Version: 5, TypesFilter: []string{"consumer"}}), nil)
	sameListing(t, "states empty", h.listed(&kmsg.ListGroupsRequest{Version: 4, StatesFilter: []string{"empty"}}),
		map[string]string{"offsets-only": "Empty/", "left": "Empty/consumer", "left-with-offsets": "Empty/consumer"})
	sameListing(t, "states Stable, PreparingRebalance",
		h.listed(&kmsg.ListGroupsRequest{Version: 4, StatesFilter: []string{"Stable", "PreparingRebalance"}}),
		map[string]string{"stable": "Stable/consumer", "preparing": "PreparingRebalance/consumer"})
	sameListing(t, "states Dead", h.listed(&kmsg.ListGroupsRequest{Version: 4, StatesFilter: []string{"Dead"}}), nil)
	desc := h.c.DescribeGroups(h.ctx, &kmsg.DescribeGroupsRequest{Version: 5, Groups: []string{"left", "left-with-offsets", "offsets-only"}})
	for i, want := range []string{"consumer", "consumer", ""} {
		if g := desc.Groups[i]; g.ErrorCode != 0 || g.State != "Empty" || g.ProtocolType != want {
			t.Fatalf("describe %s: %+v, want Empty with protocol type %q", g.Group, g, want)
		}
	}

	// After a restart the Empty groups keep their protocol type.
	h.restart(apps)
	got := h.listed(&kmsg.ListGroupsRequest{Version: 5, StatesFilter: []string{"Empty"}})
	sameListing(t, "after a restart", got,
		map[string]string{"offsets-only": "Empty/", "left": "Empty/consumer", "left-with-offsets": "Empty/consumer"})

	// The retention sweep forgets the Empty group without offsets, as
	// Kafka's cleanup; DeleteGroups deletes one.
	if _, err := h.c.ExpireOffsets(h.ctx); err != nil {
		t.Fatal(err)
	}
	h.flush()
	sameListing(t, "after the sweep", h.listed(&kmsg.ListGroupsRequest{Version: 5, StatesFilter: []string{"Empty"}}),
		map[string]string{"offsets-only": "Empty/", "left-with-offsets": "Empty/consumer"})
	ids, _ = h.stableGroup("left-again", 1)
	leave("left-again", ids)
	del := h.c.DeleteGroups(h.ctx, &kmsg.DeleteGroupsRequest{Version: 2, Groups: []string{"left-again", "left-with-offsets", "left-again"}})
	// A group named twice is answered once (Kafka 4.4 answers so).
	if len(del.Groups) != 2 || del.Groups[0].Group != "left-again" || del.Groups[0].ErrorCode != 0 ||
		del.Groups[1].Group != "left-with-offsets" || del.Groups[1].ErrorCode != 0 {
		t.Fatalf("delete: %+v", del.Groups)
	}
	del = h.c.DeleteGroups(h.ctx, &kmsg.DeleteGroupsRequest{Version: 2, Groups: []string{"left-again"}})
	if del.Groups[0].ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("delete again: %+v", del.Groups)
	}
	h.flush()
	sameListing(t, "after DeleteGroups", h.listed(&kmsg.ListGroupsRequest{Version: 5, StatesFilter: []string{"Empty"}}),
		map[string]string{"offsets-only": "Empty/"})
	if apps.saved("left-again") || apps.saved("left-with-offsets") || apps.saved("left") {
		t.Fatal("a deleted or forgotten group's state is still saved")
	}
}

// TestDescribeRebalancingKeepsAssignments: outside Stable, DescribeGroups
// lists each member without its protocol metadata but with its last
// assignment, as Kafka's ClassicGroupMember.describeNoMetadata does.
func TestDescribeRebalancingKeepsAssignments(t *testing.T) {
	h := newHarness(t)
	ids, _ := h.stableGroup("g", 2)
	h.joinAsync(joinReq{group: "g", member: ids[0]}) // a known member rejoins: PreparingRebalance
	h.flush()
	d := h.describe("g")
	if d.State != "PreparingRebalance" || d.Protocol != "" {
		t.Fatalf("state %q protocol %q, want PreparingRebalance and none", d.State, d.Protocol)
	}
	for _, m := range d.Members {
		if len(m.ProtocolMetadata) != 0 || string(m.MemberAssignment) != "assignment-"+m.MemberID {
			t.Errorf("member %s: metadata %q assignment %q, want none and its last assignment", m.MemberID, m.ProtocolMetadata, m.MemberAssignment)
		}
	}
}
