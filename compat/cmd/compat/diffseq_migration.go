package main

import (
	"reflect"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// seqConsumerMigration drives the online migration between a classic
// consumer group and a KIP-848 consumer group (docs/consumer-protocol.md
// §8; Kafka 4.4's GroupMetadataManager classicGroup*ToConsumerGroup,
// convertToConsumerGroup, convertToClassicGroup) through the same requests
// on both servers: two classic members (JoinGroup v9, SyncGroup) make a
// Stable classic group; a consumer-protocol member joins
// (ConsumerGroupHeartbeat v1, its own member id, the range assignor, whose
// assignment is exact) and the group is upgraded; the classic members are
// told to rebalance, rejoin and sync through the consumer group, and get
// the errors a classic request can get there; offsets are committed and
// fetched with their generations; the consumer-protocol member is refused
// by the classic APIs and OffsetCommit v8; a classic member leaves
// (LeaveGroup: fenced) and joins again; the consumer-protocol member leaves and
// the group is downgraded to a classic group, which rebalances. A second
// group, classic with protocol type "connect", refuses the upgrade.
//
// It runs in the "hi" run only, at pinned versions (the migration is one
// behaviour, not one per version). The classic members' ids are generated
// by the servers: each member has its own connection and client id
// ("mig-a", "mig-b"), so that their ids sort in the same order on both
// servers (the range assignor orders members by id) and the
// consumer-protocol member's id, "mig-c-consumer", sorts last; the ids are
// replaced by their names in the answers ("<A>", "<B>") and the member
// lists, whose order is a hash map's in Kafka, sorted by them.
func seqConsumerMigration(t *diffTarget, p string) {
	if !strings.HasSuffix(p, "-hi-") || t.v(68) < 1 || t.v(11) < 9 {
		return
	}
	mt, g := p+"mt", p+"mg"
	createTopic(t, "", mt, 4, nil)
	t.do("FindCoordinator mg", waitCoordinator(t, g))
	waitAssignable(t, p+"probe", mt)
	mtID := topicID(t, mt)

	a, b, x := subTarget(t, "mig-a"), subTarget(t, "mig-b"), subTarget(t, "mig-x")
	names := map[string]string{} // server-generated member id → its name
	defer func() {
		for _, s := range []*diffTarget{a, b, x} {
			s.w.Close()
			t.mu.Lock()
			t.ex = append(t.ex, s.ex...)
			t.mu.Unlock()
		}
		for _, e := range t.ex {
			if e.resp != nil {
				renameMembers(reflect.ValueOf(e.resp), names)
			}
		}
	}()

	// The connect group (step 6) runs beside the rest: its classic
	// rebalance waits out group.initial.rebalance.delay.ms.
	var wg sync.WaitGroup
	var mx string
	wg.Add(1)
	go func() {
		defer wg.Done()
		mx = seqConnectGroupUpgrade(x, p+"mg-connect", mt)
	}()
	defer func() {
		wg.Wait()
		if mx != "" {
			names[mx] = "<X>"
		}
	}()

	const session, rebalance = 30000, 30000
	meta := func(owned ...int32) []byte {
		m := kmsg.NewConsumerMemberMetadata()
		m.Version = 1
		m.Topics = []string{mt}
		if len(owned) > 0 {
			m.OwnedPartitions = []kmsg.ConsumerMemberMetadataOwnedPartition{{Topic: mt, Partitions: owned}}
		}
		return m.AppendTo(nil)
	}
	joinReq := func(member, protocol string, md []byte) *kmsg.JoinGroupRequest {
		jr := kmsg.NewPtrJoinGroupRequest()
		jr.Group, jr.MemberID, jr.ProtocolType = g, member, "consumer"
		jr.SessionTimeoutMillis, jr.RebalanceTimeoutMillis = session, rebalance
		jr.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: protocol, Metadata: md}}
		return jr
	}
	join := func(s *diffTarget, label, member string, md []byte) *kmsg.JoinGroupResponse {
		if r, ok := doAt(s, label, 9, joinReq(member, "range", md)).(*kmsg.JoinGroupResponse); ok {
			return r
		}
		return nil
	}
	idOf := func(r *kmsg.JoinGroupResponse, name string) string {
		if r == nil {
			return ""
		}
		if r.MemberID != "" {
			names[r.MemberID] = name
		}
		return r.MemberID
	}
	genOf := func(r *kmsg.JoinGroupResponse) int32 {
		if r == nil {
			return -1
		}
		return r.Generation
	}
	syncGroup := func(s *diffTarget, label, member string, gen int32, protocol string, assign []kmsg.SyncGroupRequestGroupAssignment) *kmsg.SyncGroupResponse {
		sg := kmsg.NewPtrSyncGroupRequest()
		sg.Group, sg.Generation, sg.MemberID = g, gen, member
		sg.ProtocolType, sg.Protocol = ptr("consumer"), ptr(protocol)
		sg.GroupAssignment = assign
		if r, ok := doAt(s, label, 5, sg).(*kmsg.SyncGroupResponse); ok {
			return r
		}
		return nil
	}
	heartbeat := func(s *diffTarget, label, member string, gen int32) {
		hb := kmsg.NewPtrHeartbeatRequest()
		hb.Group, hb.Generation, hb.MemberID = g, gen, member
		doAt(s, label, 4, hb)
	}
	assignment := func(parts ...int32) []byte { return consumerAssignment(mt, parts...) }
	describeGroups := func(label string) {
		dg := kmsg.NewPtrDescribeGroupsRequest()
		dg.Groups = []string{g}
		doAt(t, label, 5, dg)
	}
	listGroups := func(label string) {
		lg := kmsg.NewPtrListGroupsRequest()
		if r, ok := doAt(t, label, 5, lg).(*kmsg.ListGroupsResponse); ok {
			// Only this sequence's group: the others are other
			// sequences' (and compared there).
			var keep []kmsg.ListGroupsResponseGroup
			for _, gr := range r.Groups {
				if gr.Group == g {
					keep = append(keep, gr)
				}
			}
			r.Groups = keep
		}
	}
	cgDescribe := func(label string) {
		d := kmsg.NewPtrConsumerGroupDescribeRequest()
		d.Groups = []string{g}
		doAt(t, label, 1, d)
	}

	// 1. Two classic members, A (the leader: it joins first) and B.
	ra := join(a, "JoinGroup A without a member id", "", meta())
	rb := join(b, "JoinGroup B without a member id", "", meta())
	ma, mb := idOf(ra, "<A>"), idOf(rb, "<B>")
	var jwg sync.WaitGroup
	jwg.Add(2)
	go func() { defer jwg.Done(); ra = join(a, "JoinGroup A with its member id (first rebalance)", ma, meta()) }()
	go func() {
		defer jwg.Done()
		time.Sleep(500 * time.Millisecond)
		rb = join(b, "JoinGroup B with its member id (first rebalance)", mb, meta())
	}()
	jwg.Wait()
	gen := genOf(ra)
	syncGroup(a, "SyncGroup A (leader): A mt[0,1], B mt[2,3]", ma, gen, "range", []kmsg.SyncGroupRequestGroupAssignment{
		{MemberID: ma, MemberAssignment: assignment(0, 1)}, {MemberID: mb, MemberAssignment: assignment(2, 3)}})
	syncGroup(b, "SyncGroup B", mb, genOf(rb), "range", nil)
	heartbeat(a, "Heartbeat A (Stable classic group)", ma, gen)
	describeGroups("DescribeGroups mg (Stable classic group)")
	listGroups("ListGroups mg (classic)")

	// 2. A consumer-protocol member joins: the group is upgraded.
	const mc = "mig-c-consumer"
	cHeartbeat := func(label string, epoch int32, owned ...int32) *kmsg.ConsumerGroupHeartbeatResponse {
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Group, req.MemberID, req.MemberEpoch = g, mc, epoch
		if epoch == 0 {
			req.RebalanceTimeoutMillis = rebalance
			req.SubscribedTopicNames = []string{mt}
			req.ServerAssignor = ptr("range")
		}
		if epoch >= 0 {
			req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
			if len(owned) > 0 {
				req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{{TopicID: mtID, Partitions: owned}}
			}
		}
		if r, ok := doAt(t, label, 1, req).(*kmsg.ConsumerGroupHeartbeatResponse); ok {
			return r
		}
		return nil
	}
	rc := cHeartbeat("ConsumerGroupHeartbeat C joins (upgrade)", 0)
	ec := int32(-1)
	if rc != nil {
		ec = rc.MemberEpoch
	}
	cgDescribe("ConsumerGroupDescribe mg after the upgrade")
	listGroups("ListGroups mg (upgraded)")
	describeGroups("DescribeGroups mg (a consumer group)")

	// 3. The classic members, through the consumer group.
	heartbeat(a, "Heartbeat A at its classic generation", ma, gen)
	heartbeat(b, "Heartbeat B at its classic generation", mb, gen)
	ra = join(a, "JoinGroup A rejoins, owning mt[0,1]", ma, meta(0, 1))
	ga := genOf(ra)
	syncGroup(a, "SyncGroup A at its member epoch", ma, ga, "range", nil)
	rb = join(b, "JoinGroup B rejoins, owning mt[2,3]", mb, meta(2, 3))
	gb := genOf(rb)
	syncGroup(b, "SyncGroup B at its member epoch", mb, gb, "range", nil)
	heartbeat(b, "Heartbeat B, still owning mt[3]", mb, gb)
	rb = join(b, "JoinGroup B rejoins, owning mt[2]", mb, meta(2))
	gb = genOf(rb)
	syncGroup(b, "SyncGroup B after revoking", mb, gb, "range", nil)
	rc = cHeartbeat("ConsumerGroupHeartbeat C: mt[3] released", ec)
	if rc != nil {
		ec = rc.MemberEpoch
	}
	cHeartbeat("ConsumerGroupHeartbeat C owns mt[3]", ec, 3)
	heartbeat(a, "Heartbeat A at its member epoch", ma, ga)
	heartbeat(b, "Heartbeat B at its member epoch", mb, gb)
	syncGroup(a, "SyncGroup A at a wrong generation", ma, ga+7, "range", nil)
	heartbeat(a, "Heartbeat A at a wrong generation", ma, ga+7)
	heartbeat(a, "Heartbeat of an unknown member", "mig-unknown-member", ga)
	syncGroup(a, "SyncGroup A with a wrong protocol name", ma, ga, "roundrobin", nil)
	jr := joinReq(ma, "roundrobin", meta(0, 1))
	doAt(a, "JoinGroup A with a protocol B does not support", 9, jr)
	cgDescribe("ConsumerGroupDescribe mg with the classic members reconciled")

	// 4. Offsets from a classic member: its generation is its member epoch.
	commit := func(label string, gen int32) {
		oc := kmsg.NewPtrOffsetCommitRequest()
		oc.Group, oc.Generation, oc.MemberID = g, gen, ma
		oc.RetentionTimeMillis = -1
		oc.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: mt, Partitions: []kmsg.OffsetCommitRequestTopicPartition{
			{Partition: 0, Offset: 0, LeaderEpoch: -1}}}}
		doAt(a, label, 8, oc)
	}
	commit("OffsetCommit v8 by A at its generation", ga)
	commit("OffsetCommit v8 by A at a newer generation", ga+1)
	fetch := func(label string, epoch int32) {
		of := kmsg.NewPtrOffsetFetchRequest()
		of.Groups = []kmsg.OffsetFetchRequestGroup{{Group: g, MemberID: ptr(ma), MemberEpoch: epoch,
			Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: mt, Partitions: []int32{0, 1}}}}}
		doAt(a, label, 9, of)
	}
	fetch("OffsetFetch v9 by A at its generation", ga)
	fetch("OffsetFetch v9 by A at a wrong generation", ga+3)

	// The consumer-protocol member through the classic APIs, and the
	// classic LeaveGroup's refusals.
	heartbeat(t, "Heartbeat of C (not a classic member)", mc, ec)
	syncGroup(t, "SyncGroup of C (not a classic member)", mc, ec, "range", nil)
	ocC := func(label string, v int16) {
		oc := kmsg.NewPtrOffsetCommitRequest()
		oc.Group, oc.Generation, oc.MemberID = g, ec, mc
		oc.RetentionTimeMillis = -1
		oc.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: mt, Partitions: []kmsg.OffsetCommitRequestTopicPartition{
			{Partition: 3, Offset: 0, LeaderEpoch: -1}}}}
		doAt(t, label, v, oc)
	}
	ocC("OffsetCommit v8 by C (the consumer protocol needs v9)", 8)
	ocC("OffsetCommit v9 by C at its epoch", 9)
	lv := kmsg.NewPtrLeaveGroupRequest()
	lv.Group = g
	lv.Members = []kmsg.LeaveGroupRequestMember{{MemberID: "mig-unknown-member"}, {MemberID: "", InstanceID: ptr("mig-no-instance")}}
	doAt(t, "LeaveGroup v5 of an unknown member and an unknown instance", 5, lv)

	// A classic member leaves through LeaveGroup (it is fenced: the group
	// epoch moves and its partitions go to the others), then joins again
	// with its old member id, as a new member.
	epochOf := func(r *kmsg.ConsumerGroupHeartbeatResponse) int32 {
		if r == nil {
			return -1
		}
		return r.MemberEpoch
	}
	lvB := kmsg.NewPtrLeaveGroupRequest()
	lvB.Group = g
	lvB.Members = []kmsg.LeaveGroupRequestMember{{MemberID: mb}}
	doAt(b, "LeaveGroup v5 B (fenced from the consumer group)", 5, lvB)
	cgDescribe("ConsumerGroupDescribe mg after B left")
	ec = epochOf(cHeartbeat("ConsumerGroupHeartbeat C after B left", ec, 3))
	cHeartbeat("ConsumerGroupHeartbeat C owns mt[2,3]", ec, 2, 3)
	heartbeat(a, "Heartbeat A after B left", ma, ga)
	ra = join(a, "JoinGroup A rejoins after B left", ma, meta(0, 1))
	ga = genOf(ra)
	syncGroup(a, "SyncGroup A after B left", ma, ga, "range", nil)
	rb = join(b, "JoinGroup B joins again with its old member id", mb, meta())
	gb = genOf(rb)
	syncGroup(b, "SyncGroup B after joining again", mb, gb, "range", nil)
	heartbeat(b, "Heartbeat B waiting for mt[2]", mb, gb)
	rc = cHeartbeat("ConsumerGroupHeartbeat C, owning mt[2,3]: revoke mt[2]", ec, 2, 3)
	ec = epochOf(cHeartbeat("ConsumerGroupHeartbeat C revoked mt[2]", epochOf(rc), 3))
	heartbeat(b, "Heartbeat B: mt[2] released", mb, gb)
	rb = join(b, "JoinGroup B rejoins for mt[2]", mb, meta())
	gb = genOf(rb)
	syncGroup(b, "SyncGroup B with mt[2]", mb, gb, "range", nil)
	heartbeat(a, "Heartbeat A after B joined again", ma, ga)
	ra = join(a, "JoinGroup A rejoins after B joined again", ma, meta(0, 1))
	ga = genOf(ra)
	syncGroup(a, "SyncGroup A after B joined again", ma, ga, "range", nil)
	heartbeat(a, "Heartbeat A at the group epoch", ma, ga)
	heartbeat(b, "Heartbeat B at the group epoch", mb, gb)
	cgDescribe("ConsumerGroupDescribe mg after B joined again")

	// 5. The consumer-protocol member leaves: the group is downgraded to
	// a classic group, which rebalances.
	cHeartbeat("ConsumerGroupHeartbeat C leaves (downgrade)", -1)
	listGroups("ListGroups mg (downgraded)")
	describeGroups("DescribeGroups mg after the downgrade")
	cgDescribe("ConsumerGroupDescribe mg after the downgrade (a classic group)")
	cHeartbeat("ConsumerGroupHeartbeat C at its old epoch after the downgrade", ec)
	heartbeat(a, "Heartbeat A after the downgrade", ma, ga)
	heartbeat(b, "Heartbeat B after the downgrade", mb, gb)
	// Kafka's leader after a downgrade is the first member of a hash map:
	// the two JoinGroup answers are compared by role (leader, follower).
	var ja, jb kmsg.Response
	var va, vb int16
	var ea, eb error
	jwg.Add(2)
	go func() { defer jwg.Done(); ja, va, ea = sendAt(a, 9, joinReq(ma, "range", meta())) }()
	go func() { defer jwg.Done(); jb, vb, eb = sendAt(b, 9, joinReq(mb, "range", meta())) }()
	jwg.Wait()
	leader := ""
	if r, ok := ja.(*kmsg.JoinGroupResponse); ok {
		leader = r.LeaderID
	}
	roles := map[string]string{ma: "<leader>", mb: "<follower>"}
	if leader == mb {
		roles = map[string]string{mb: "<leader>", ma: "<follower>"}
	}
	for _, j := range []struct {
		resp kmsg.Response
		v    int16
		err  error
		id   string
	}{{ja, va, ea, ma}, {jb, vb, eb, mb}} {
		if r, ok := j.resp.(*kmsg.JoinGroupResponse); ok {
			renameMembers(reflect.ValueOf(r), roles)
		}
		t.mu.Lock()
		t.ex = append(t.ex, &exchange{label: "JoinGroup " + roles[j.id] + " rejoins the classic group", key: 11, ver: j.v, resp: j.resp, err: j.err})
		t.mu.Unlock()
	}
	var la, lb []kmsg.SyncGroupRequestGroupAssignment
	ra, _ = ja.(*kmsg.JoinGroupResponse)
	rb, _ = jb.(*kmsg.JoinGroupResponse)
	full := []kmsg.SyncGroupRequestGroupAssignment{{MemberID: ma, MemberAssignment: assignment(0, 1)}, {MemberID: mb, MemberAssignment: assignment(2, 3)}}
	if leader == mb {
		lb = full
	} else {
		la = full
	}
	// The leader syncs first (the follower's SyncGroup would wait for it).
	first, second := func() { syncGroup(a, "SyncGroup A after the downgrade", ma, genOf(ra), "range", la) }, func() { syncGroup(b, "SyncGroup B after the downgrade", mb, genOf(rb), "range", lb) }
	if leader == mb {
		first, second = second, first
	}
	first()
	second()
	heartbeat(a, "Heartbeat A in the classic group again", ma, genOf(ra))
	describeGroups("DescribeGroups mg (Stable classic group again)")
	listGroups("ListGroups mg (classic again)")

	// Cleanup, not compared: the members leave and the group goes, so
	// that later sequences' group listings do not see it.
	lv = kmsg.NewPtrLeaveGroupRequest()
	lv.Group = g
	lv.Members = []kmsg.LeaveGroupRequestMember{{MemberID: ma}, {MemberID: mb}}
	_, _, _ = t.send(lv)
	dl := kmsg.NewPtrDeleteGroupsRequest()
	dl.Groups = []string{g, p + "probe"}
	_, _, _ = t.send(dl)
}

// seqConnectGroupUpgrade: a classic group whose member's protocol type is
// "connect" refuses a consumer-protocol member (GROUP_ID_NOT_FOUND: the
// group does not use the consumer embedded protocol).
func seqConnectGroupUpgrade(x *diffTarget, g, mt string) string {
	jr := kmsg.NewPtrJoinGroupRequest()
	jr.Group, jr.ProtocolType = g, "connect"
	jr.SessionTimeoutMillis, jr.RebalanceTimeoutMillis = 30000, 30000
	jr.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "sessioned", Metadata: []byte("worker")}}
	r, ok := doAt(x, "JoinGroup X (connect) without a member id", 9, jr).(*kmsg.JoinGroupResponse)
	if !ok {
		return ""
	}
	jr.MemberID = r.MemberID
	r, ok = doAt(x, "JoinGroup X (connect) with its member id", 9, jr).(*kmsg.JoinGroupResponse)
	if !ok {
		return jr.MemberID
	}
	sg := kmsg.NewPtrSyncGroupRequest()
	sg.Group, sg.Generation, sg.MemberID = g, r.Generation, r.MemberID
	sg.ProtocolType, sg.Protocol = ptr("connect"), ptr("sessioned")
	sg.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: r.MemberID, MemberAssignment: []byte("all")}}
	doAt(x, "SyncGroup X (connect, leader)", 5, sg)
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Group, req.MemberID, req.MemberEpoch = g, "mig-y-consumer", 0
	req.RebalanceTimeoutMillis, req.SubscribedTopicNames, req.ServerAssignor = 30000, []string{mt}, ptr("range")
	req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	doAt(x, "ConsumerGroupHeartbeat join to the connect group", 1, req)
	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Groups = []string{g}
	doAt(x, "DescribeGroups the connect group after the refused upgrade", 5, dg)
	lv := kmsg.NewPtrLeaveGroupRequest()
	lv.Group = g
	lv.Members = []kmsg.LeaveGroupRequestMember{{MemberID: r.MemberID}}
	_, _, _ = sendAt(x, 5, lv)
	dl := kmsg.NewPtrDeleteGroupsRequest()
	dl.Groups = []string{g}
	_, _, _ = x.send(dl)
	return r.MemberID
}

// subTarget is a second connection to t's server, with its own client id
// (a classic member id starts with it); its exchanges are merged into t's
// by the caller.
func subTarget(t *diffTarget, clientID string) *diffTarget {
	w := &wireConn{addr: t.w.addr}
	if nw, err := dialWire(t.w.addr); err == nil {
		w = nw
	}
	w.f = kmsg.NewRequestFormatter(kmsg.FormatterClientID(clientID))
	return &diffTarget{name: t.name, w: w, pick: t.pick, v: t.v, node: t.node}
}

// sendAt sends req at version v unrecorded.
func sendAt(t *diffTarget, v int16, req kmsg.Request) (kmsg.Response, int16, error) {
	req.SetVersion(v)
	resp, err := t.w.do(req)
	return resp, v, err
}

// doAt is do at version v (both servers serve it), resending while the
// answer has a retriable error.
func doAt(t *diffTarget, label string, v int16, req kmsg.Request) kmsg.Response {
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, _, err := sendAt(t, v, req)
		if err != nil || anyRetriable(resp) == 0 || time.Now().After(deadline) {
			t.mu.Lock()
			t.ex = append(t.ex, &exchange{label: label, key: req.Key(), ver: v, resp: resp, err: err})
			t.mu.Unlock()
			return resp
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// renameMembers replaces, in every string of v, the member ids of names
// by their names, and sorts the lists of members (structs with a MemberID)
// by it.
func renameMembers(v reflect.Value, names map[string]string) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			renameMembers(v.Elem(), names)
		}
	case reflect.String:
		s := v.String()
		for id, name := range names {
			if id != "" && strings.Contains(s, id) {
				s = strings.ReplaceAll(s, id, name)
			}
		}
		if v.CanSet() && s != v.String() {
			v.SetString(s)
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				renameMembers(v.Field(i), names)
			}
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return
		}
		for i := 0; i < v.Len(); i++ {
			renameMembers(v.Index(i), names)
		}
		if v.Len() > 1 && v.Type().Elem().Kind() == reflect.Struct {
			if _, ok := v.Type().Elem().FieldByName("MemberID"); ok {
				if _, keyed := elemKey(v.Index(0)); !keyed {
					sort.SliceStable(v.Interface(), func(i, j int) bool {
						return fmtVal(v.Index(i).FieldByName("MemberID")) < fmtVal(v.Index(j).FieldByName("MemberID"))
					})
				}
			}
		}
	}
}
