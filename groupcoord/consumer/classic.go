package consumer

// Classic members in a consumer group, and the online migrations between a
// classic group and a consumer group (docs/consumer-protocol.md §8; Kafka
// 4.4's GroupMetadataManager classicGroup*ToConsumerGroup, convertTo*,
// ConsumerGroup.fromClassicGroup, ClassicGroup.fromConsumerGroup).

import (
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Migration policies (group.consumer.migration.policy): which online
// conversions between a classic group and a consumer group with members
// are allowed. Empty groups convert either way whatever the policy.
const (
	MigrationBidirectional = "bidirectional" // the default
	MigrationUpgrade       = "upgrade"
	MigrationDowngrade     = "downgrade"
	MigrationDisabled      = "disabled"
)

// ValidMigrationPolicy reports whether p names a policy ("" is the
// default, bidirectional).
func ValidMigrationPolicy(p string) bool {
	switch p {
	case "", MigrationBidirectional, MigrationUpgrade, MigrationDowngrade, MigrationDisabled:
		return true
	}
	return false
}

func (c Config) upgradeEnabled() bool {
	return c.MigrationPolicy == "" || c.MigrationPolicy == MigrationBidirectional || c.MigrationPolicy == MigrationUpgrade
}

func (c Config) downgradeEnabled() bool {
	return c.MigrationPolicy == "" || c.MigrationPolicy == MigrationBidirectional || c.MigrationPolicy == MigrationDowngrade
}

// ClassicProtocol is one protocol of a classic member's JoinGroup: its
// name (the assignor) and metadata (a ConsumerProtocol subscription).
type ClassicProtocol struct {
	Name     string `json:"name"`
	Metadata []byte `json:"metadata"`
}

// ClassicMetadata is what a consumer group keeps of a member that speaks
// the classic protocol (Kafka's ClassicMemberMetadata): its session
// timeout and its protocols in its order of preference. A member without
// it speaks the consumer protocol.
type ClassicMetadata struct {
	SessionTimeout time.Duration
	Protocols      []ClassicProtocol
}

// ClassicMember is a classic group's member as an upgrade takes it over
// (FromClassic) or a downgrade hands it back (DowngradeMembers).
type ClassicMember struct {
	ID, InstanceID, ClientID, ClientHost string
	RebalanceTimeout, SessionTimeout     time.Duration
	Protocols                            []ClassicProtocol
	// Assignment (FromClassic): its last SyncGroup assignment, a
	// ConsumerProtocol assignment; empty for none.
	Assignment []byte
	// Target (DowngradeMembers): its partitions in the consumer group's
	// target assignment, topic → partitions.
	Target map[string][]int32
}

// ValidateUpgrade is GMM.validateOnlineUpgrade: a classic group with
// members of protocol type protocolType may become a consumer group when
// the policy allows an upgrade, its members speak the consumer embedded
// protocol and they fit (group.consumer.max.size). Errors: *Error
// GROUP_ID_NOT_FOUND with Kafka's message.
func ValidateUpgrade(cfg Config, id, protocolType string, members int) error {
	switch {
	case !cfg.upgradeEnabled():
		return errorf(kerr.GroupIDNotFound, "Cannot upgrade classic group %s to consumer group because online upgrade is disabled.", id)
	case protocolType != "consumer":
		return errorf(kerr.GroupIDNotFound, "Cannot upgrade classic group %s to consumer group because the group does not use the consumer embedded protocol.", id)
	case members > cfg.MaxSize:
		return errorf(kerr.GroupIDNotFound, "Cannot upgrade classic group %s to consumer group because the group size exceeds the consumer group maximum size.", id)
	}
	return nil
}

// FromClassic returns the consumer group a classic group becomes
// (ConsumerGroup.fromClassicGroup): group epoch and assignment epoch the
// classic generation; each member at that epoch, Stable, subscribed to
// the topics of its subscription for the group's protocol (protocol; its
// first one when the group has none), owning and targeted with its last
// assignment (topics not known dropped), its classic metadata kept.
// Errors: *Error GROUP_ID_NOT_FOUND, Kafka's messages, for a subscription
// or assignment that does not decode and for an assignment carrying user
// data (a custom assignor's, which the consumer protocol would lose).
func FromClassic(topics Topics, id string, generation int32, protocol string, members []ClassicMember) (*Group, error) {
	malformed := errorf(kerr.GroupIDNotFound, "Cannot upgrade classic group %s to consumer group because the embedded consumer protocol is malformed.", id)
	g := NewGroup(id)
	g.Epoch, g.AssignmentEpoch = generation, generation
	for _, cm := range members {
		meta := cm.Protocols[0].Metadata
		for _, p := range cm.Protocols {
			if p.Name == protocol {
				meta = p.Metadata
			}
		}
		var sub kmsg.ConsumerMemberMetadata
		if err := sub.ReadFrom(meta); err != nil {
			return nil, malformed
		}
		assigned := map[string][]int32{}
		if len(cm.Assignment) > 0 {
			var a kmsg.ConsumerMemberAssignment
			if err := a.ReadFrom(cm.Assignment); err != nil {
				return nil, malformed
			}
			if len(a.UserData) > 0 {
				return nil, errorf(kerr.GroupIDNotFound, "Cannot upgrade classic group %s to consumer group because an unsupported custom assignor is in use. Please refer to the documentation or switch to a default assignor before re-attempting the upgrade.", id)
			}
			for _, t := range a.Topics {
				if _, ok := topics.Partitions(t.Topic); ok {
					assigned[t.Topic] = append(assigned[t.Topic], t.Partitions...)
				}
			}
		}
		m := &GroupMember{Member: Member{ID: cm.ID, MemberEpoch: generation, PreviousMemberEpoch: generation, State: Stable,
			Assigned: namesWithEpoch(assigned, generation)},
			InstanceID: cm.InstanceID, RebalanceTimeout: cm.RebalanceTimeout, ClientID: cm.ClientID, ClientHost: cm.ClientHost,
			Topics:  slices.Compact(slices.Sorted(slices.Values(sub.Topics))),
			Classic: &ClassicMetadata{SessionTimeout: cm.SessionTimeout, Protocols: slices.Clone(cm.Protocols)}}
		if sub.Rack != nil {
			m.RackID = *sub.Rack
		}
		g.put(m)
		g.Target[cm.ID] = sortedTarget(assigned)
	}
	g.MetadataHash = g.metadataHash(topics)
	g.hashEpoch = g.Epoch
	return g, nil
}

func namesWithEpoch(names map[string][]int32, epoch int32) Partitions {
	p := Partitions{}
	for t, ps := range names {
		if len(ps) == 0 {
			continue
		}
		p[t] = map[int32]int32{}
		for _, part := range ps {
			p[t][part] = epoch
		}
	}
	return p.compact()
}

func sortedTarget(names map[string][]int32) map[string][]int32 {
	out := map[string][]int32{}
	for t, ps := range names {
		if len(ps) > 0 {
			out[t] = slices.Compact(slices.Sorted(slices.Values(ps)))
		}
	}
	return out
}

// ClassicJoinRequest is a classic JoinGroup (API key 11) to a consumer
// group with members, as ClassicJoin takes it.
type ClassicJoinRequest struct {
	MemberID   string // "" for a member without one yet
	InstanceID string // "" for a dynamic member
	// RequireKnownMemberID: the JoinGroup is v4+ and neither a member id
	// nor an instance id was given (KIP-394: MEMBER_ID_REQUIRED).
	RequireKnownMemberID bool
	ProtocolType         string
	Protocols            []ClassicProtocol
	SessionTimeout       time.Duration
	RebalanceTimeout     time.Duration
	ClientID, ClientHost string
}

// ClassicJoinResult is ClassicJoin's answer: the member's id, its epoch as
// the JoinGroup's generation and the protocol name (its first protocol's);
// MemberIDRequired asks the member to join again with MemberID.
type ClassicJoinResult struct {
	MemberID         string
	Generation       int32
	Protocol         string
	MemberIDRequired bool
	// Replaced: the member took a static member's place (its instance
	// id's), which may leave only classic members (CanDowngrade).
	Replaced bool
}

// supportsClassic is ConsumerGroup.supportsClassicProtocols: the protocol
// type is "consumer" and, in a group with members, one of the protocol
// names is supported by every classic member.
func (g *Group) supportsClassic(protocolType string, protocols []ClassicProtocol) bool {
	if protocolType != "consumer" {
		return false
	}
	if len(g.Members) == 0 {
		return len(protocols) > 0
	}
	classic := 0
	counts := map[string]int{}
	for _, m := range g.Members {
		if m.Classic == nil {
			continue
		}
		classic++
		seen := map[string]bool{}
		for _, p := range m.Classic.Protocols {
			if !seen[p.Name] {
				seen[p.Name] = true
				counts[p.Name]++
			}
		}
	}
	return slices.ContainsFunc(protocols, func(p ClassicProtocol) bool { return counts[p.Name] == classic })
}

// ClassicJoin serves a classic JoinGroup to a consumer group
// (GMM.classicGroupJoinToConsumerGroup): the member is created or updated
// from its ConsumerProtocol subscription (topics, rack, owned partitions;
// no regular expression), the group epoch and target assignment move as
// for a heartbeat, and the member is reconciled with the partitions its
// subscription says it owns. The caller arms the timers returned (the
// member's session with its classic session timeout) and a sync timer of
// the member's rebalance timeout. Errors: *Error: INCONSISTENT_GROUP_PROTOCOL
// (migration disabled, protocols not supported by every classic member, a
// subscription that does not decode), GROUP_MAX_SIZE_REACHED,
// UNKNOWN_MEMBER_ID and FENCED_INSTANCE_ID (a static member's ids do not
// match), FENCED_MEMBER_EPOCH (a member in an unknown state). A refused
// join changes nothing.
func (g *Group) ClassicJoin(cfg Config, topics Topics, req ClassicJoinRequest) (ClassicJoinResult, Timers, error) {
	if cfg.MigrationPolicy == MigrationDisabled {
		return ClassicJoinResult{}, Timers{}, errorf(kerr.InconsistentGroupProtocol,
			"Cannot join the consumer group %s with the classic protocol because the group migration is disabled.", g.ID)
	}
	memberID := req.MemberID
	unknown := memberID == ""
	if unknown {
		memberID = NewMemberID()
	}
	if err := g.checkFull(cfg, memberID, req.InstanceID); err != nil {
		return ClassicJoinResult{}, Timers{}, err
	}
	if !g.supportsClassic(req.ProtocolType, req.Protocols) {
		return ClassicJoinResult{}, Timers{}, errorf(kerr.InconsistentGroupProtocol, "Member %s's protocols are not supported.", memberID)
	}
	if req.RequireKnownMemberID && unknown {
		return ClassicJoinResult{MemberID: memberID, MemberIDRequired: true}, Timers{}, nil
	}
	var member *GroupMember
	replaced := ""
	if req.InstanceID == "" {
		if cur, ok := g.Members[memberID]; ok {
			c := *cur
			member = &c
		} else {
			member = newMember(memberID)
		}
	} else {
		prevID, ok := g.static[req.InstanceID]
		switch {
		case ok && g.Members[prevID] != nil && unknown:
			c := *g.Members[prevID]
			c.ID, c.MemberEpoch, c.PreviousMemberEpoch = memberID, 0, 0
			member, replaced = &c, prevID
		case ok && g.Members[prevID] != nil:
			if prevID != memberID {
				return ClassicJoinResult{}, Timers{}, errorf(kerr.FencedInstanceID, "Static member %s with instance id %s was fenced by member %s.", memberID, req.InstanceID, prevID)
			}
			c := *g.Members[prevID]
			member = &c
		case unknown:
			member = newMember(memberID)
		default:
			return ClassicJoinResult{}, Timers{}, errorf(kerr.UnknownMemberID, "Instance id %s is unknown.", req.InstanceID)
		}
	}
	var sub kmsg.ConsumerMemberMetadata
	if err := sub.ReadFrom(req.Protocols[0].Metadata); err != nil {
		return ClassicJoinResult{}, Timers{}, errorf(kerr.InconsistentGroupProtocol, "Malformed embedded consumer protocol in subscription deserialization.")
	}
	owned := map[string][]int32{}
	for _, o := range sub.OwnedPartitions {
		owned[o.Topic] = append(owned[o.Topic], o.Partitions...)
	}
	if known := member.State == Stable || member.State == UnrevokedPartitions || member.State == UnreleasedPartitions; !known && len(owned) > 0 {
		return ClassicJoinResult{}, Timers{}, errorf(kerr.FencedMemberEpoch, "The consumer group member is in a unknown state. The member must abandon all its partitions and rejoin.")
	}

	updated := *member
	updated.ID = memberID
	if req.InstanceID != "" {
		updated.InstanceID = req.InstanceID
	}
	if sub.Rack != nil {
		updated.RackID = *sub.Rack
	}
	if req.RebalanceTimeout > 0 {
		updated.RebalanceTimeout = req.RebalanceTimeout
	}
	updated.Topics = slices.Compact(slices.Sorted(slices.Values(sub.Topics)))
	updated.Regex = ""
	updated.ClientID, updated.ClientHost = req.ClientID, req.ClientHost
	updated.Classic = &ClassicMetadata{SessionTimeout: req.SessionTimeout, Protocols: slices.Clone(req.Protocols)}
	old := member
	if replaced != "" {
		old = g.Members[replaced]
	}
	subscriptionChanged := !slices.Equal(updated.Topics, old.Topics) || updated.Regex != old.Regex

	updated, timers := g.update(cfg, topics, updated, replaced, subscriptionChanged, subscriptionChanged, owned)
	return ClassicJoinResult{MemberID: memberID, Generation: updated.MemberEpoch, Protocol: req.Protocols[0].Name, Replaced: replaced != ""}, timers, nil
}

// classicMember is validateConsumerGroupMember plus
// throwIfMemberDoesNotUseClassicProtocol and throwIfGenerationIdUnmatched:
// the member a classic SyncGroup or Heartbeat names. Errors: *Error
// UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID, ILLEGAL_GENERATION.
func (g *Group) classicMember(memberID, instanceID string, generation int32) (*GroupMember, error) {
	var m *GroupMember
	if instanceID == "" {
		m = g.Members[memberID]
		if m == nil {
			return nil, errorf(kerr.UnknownMemberID, "Member %s is not a member of group %s.", memberID, g.ID)
		}
	} else {
		prevID, ok := g.static[instanceID]
		if !ok || g.Members[prevID] == nil {
			return nil, errorf(kerr.UnknownMemberID, "Member with instance id %s is not a member of group %s.", instanceID, g.ID)
		}
		if prevID != memberID {
			return nil, errorf(kerr.FencedInstanceID, "Static member %s with instance id %s was fenced by member %s.", memberID, instanceID, prevID)
		}
		m = g.Members[prevID]
	}
	if m.Classic == nil {
		return nil, errorf(kerr.UnknownMemberID, "Member %s does not use the classic protocol.", m.ID)
	}
	if m.MemberEpoch != generation {
		return nil, errorf(kerr.IllegalGeneration, "The request generation id %d is not equal to the member epoch %d of member %s.", generation, m.MemberEpoch, m.ID)
	}
	return m, nil
}

// ErrRebalanceInProgress is ClassicSync's error when the member must join
// again first: the caller arms the member's join timer (its rebalance
// timeout) if none runs. errors.Is(err, kerr.RebalanceInProgress) holds.
var ErrRebalanceInProgress = &Error{Code: kerr.RebalanceInProgress, Message: "A new rebalance is triggered: the member should rejoin to catch up."}

// ClassicSync serves a classic SyncGroup (API key 14) to a consumer group
// (GMM.classicGroupSyncToConsumerGroup): it returns the member's assigned
// partitions as a ConsumerProtocol assignment in the version of its first
// protocol's subscription. protocolType and protocolName, when given, must
// be "consumer" and the member's first protocol. Errors: *Error
// UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID, ILLEGAL_GENERATION,
// INCONSISTENT_GROUP_PROTOCOL, and ErrRebalanceInProgress when the target
// assignment moved past the member and it is not revoking.
func (g *Group) ClassicSync(memberID, instanceID string, generation int32, protocolType, protocolName *string) ([]byte, error) {
	m, err := g.classicMember(memberID, instanceID, generation)
	if err != nil {
		return nil, err
	}
	name := m.Classic.Protocols[0].Name
	if protocolType != nil && *protocolType != "consumer" {
		return nil, errorf(kerr.InconsistentGroupProtocol, "The protocol type %s from member %s request is not equal to the group protocol type consumer.", *protocolType, m.ID)
	}
	if protocolName != nil && *protocolName != name {
		return nil, errorf(kerr.InconsistentGroupProtocol, "The protocol name %s from member %s request is not equal to the protocol name %s returned in the join response.", *protocolName, m.ID, name)
	}
	if g.AssignmentEpoch > m.MemberEpoch && m.State != UnrevokedPartitions {
		return nil, ErrRebalanceInProgress
	}
	names := map[string][]int32{}
	for t, ps := range m.Assigned {
		names[t] = slices.Collect(maps.Keys(ps))
	}
	return EncodeAssignment(names, m.Classic.Protocols[0].Metadata), nil
}

// ClassicHeartbeat serves a classic Heartbeat (API key 12) to a consumer
// group (GMM.classicGroupHeartbeatToConsumerGroup): rebalance is true
// (REBALANCE_IN_PROGRESS; the caller arms the join timer if none runs)
// when the member must join again: its epoch is behind the target
// assignment's, or behind the group epoch while the target assignment is
// stale, it must revoke partitions, or partitions it waits for were
// released. The caller restarts the member's session timer. Errors: *Error
// UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID, ILLEGAL_GENERATION.
//
// Kafka 4.4 compares with the target assignment's epoch only; when a
// fence bumped the group epoch and only classic members are left (a
// policy without downgrades), no heartbeat computes the target again and
// the fenced member's partitions stay unowned. Kafka before 4.4 compared
// with the group epoch; so does this while the target is stale, and the
// member's JoinGroup computes it.
func (g *Group) ClassicHeartbeat(memberID, instanceID string, generation int32) (rebalance bool, err error) {
	m, err := g.classicMember(memberID, instanceID, generation)
	if err != nil {
		return false, err
	}
	stale := g.AssignmentEpoch < g.Epoch && m.MemberEpoch < g.Epoch
	return m.MemberEpoch < g.AssignmentEpoch || stale || m.State == UnrevokedPartitions ||
		(m.State == UnreleasedPartitions && !g.waitingOnUnreleased(m)), nil
}

// waitingOnUnreleased reports whether a partition of the member's target
// that it does not have yet is still owned by another member
// (ConsumerGroup.waitingOnUnreleasedPartition).
func (g *Group) waitingOnUnreleased(m *GroupMember) bool {
	for t, ps := range g.Target[m.ID] {
		for _, p := range ps {
			if _, mine := m.Assigned[t][p]; mine {
				continue
			}
			if _, owned := g.owners[tp{t, p}]; owned {
				return true
			}
		}
	}
	return false
}

// ClassicLeave resolves the members of a classic LeaveGroup (API key 13,
// v3+ batch) to a consumer group (GMM.classicGroupLeaveToConsumerGroup):
// one response per identity (UNKNOWN_MEMBER_ID for an unknown member id or
// instance id; FENCED_INSTANCE_ID for an instance id held by another member
// id) and the member ids to fence, which the caller fences together
// (FenceOrDowngrade). Either protocol's members may be named.
func (g *Group) ClassicLeave(members []kmsg.LeaveGroupRequestMember) ([]kmsg.LeaveGroupResponseMember, []string) {
	var out []kmsg.LeaveGroupResponseMember
	var fence []string
	for _, lm := range members {
		rm := kmsg.NewLeaveGroupResponseMember()
		rm.MemberID, rm.InstanceID = lm.MemberID, lm.InstanceID
		id := lm.MemberID
		switch {
		case lm.InstanceID == nil:
			if g.Members[id] == nil {
				rm.ErrorCode = kerr.UnknownMemberID.Code
			}
		default:
			prevID, ok := g.static[*lm.InstanceID]
			switch {
			case !ok || g.Members[prevID] == nil:
				rm.ErrorCode = kerr.UnknownMemberID.Code
			case lm.MemberID != "" && lm.MemberID != prevID:
				rm.ErrorCode = kerr.FencedInstanceID.Code
			default:
				id = prevID
			}
		}
		if rm.ErrorCode == 0 && !slices.Contains(fence, id) {
			fence = append(fence, id)
		}
		out = append(out, rm)
	}
	return out, fence
}

// CanDowngrade reports whether fencing the members ids leaves a group
// that becomes a classic group (GMM.validateOnlineDowngradeWithFencedMembers):
// at least one member left, every one classic, and the policy allows a
// downgrade. (The classic group's size is not bounded here: disgw has no
// group.max.size.)
func (g *Group) CanDowngrade(cfg Config, ids []string) bool {
	if !cfg.downgradeEnabled() {
		return false
	}
	left := 0
	for id, m := range g.Members {
		if slices.Contains(ids, id) {
			continue
		}
		if m.Classic == nil {
			return false
		}
		left++
	}
	return left > 0
}

// DowngradeMembers returns the members a downgrade hands to the classic
// group (ClassicGroup.fromConsumerGroup), all but the ids fenced, in
// member id order, each with its target assignment; the group's epoch is
// the classic generation.
func (g *Group) DowngradeMembers(ids []string) []ClassicMember {
	var out []ClassicMember
	for _, id := range slices.Sorted(maps.Keys(g.Members)) {
		m := g.Members[id]
		if slices.Contains(ids, id) || m.Classic == nil {
			continue
		}
		out = append(out, ClassicMember{ID: id, InstanceID: m.InstanceID, ClientID: m.ClientID, ClientHost: m.ClientHost,
			RebalanceTimeout: m.RebalanceTimeout, SessionTimeout: m.Classic.SessionTimeout,
			Protocols: slices.Clone(m.Classic.Protocols), Target: g.Target[id]})
	}
	return out
}

// SessionTimeout is the member's session timeout: its classic one, else
// the group's (cfg.SessionTimeout).
func (g *Group) SessionTimeout(cfg Config, memberID string) time.Duration {
	if m := g.Members[memberID]; m != nil && m.Classic != nil {
		return m.Classic.SessionTimeout
	}
	return cfg.SessionTimeout
}

// IsClassic reports whether the member exists and speaks the classic
// protocol.
func (g *Group) IsClassic(memberID string) bool {
	m := g.Members[memberID]
	return m != nil && m.Classic != nil
}

// EncodeAssignment serializes partitions (topic → partitions) as a
// ConsumerProtocol assignment (topics and partitions ascending, no user
// data) in the version of the subscription metadata (its first two bytes,
// ConsumerProtocol.deserializeVersion; clamped to 0-3), as Kafka answers a
// classic member (prepareAssignment, ClassicGroup.fromConsumerGroup).
func EncodeAssignment(partitions map[string][]int32, metadata []byte) []byte {
	var version int16
	if len(metadata) >= 2 {
		version = int16(uint16(metadata[0])<<8 | uint16(metadata[1]))
	}
	version = min(max(version, 0), 3)
	a := kmsg.NewConsumerMemberAssignment()
	a.Version = version
	for _, t := range slices.Sorted(maps.Keys(partitions)) {
		ps := slices.Compact(slices.Sorted(slices.Values(partitions[t])))
		if len(ps) == 0 {
			continue
		}
		at := kmsg.NewConsumerMemberAssignmentTopic()
		at.Topic, at.Partitions = t, ps
		a.Topics = append(a.Topics, at)
	}
	return a.AppendTo(nil)
}

// IsRebalanceInProgress reports whether err is REBALANCE_IN_PROGRESS.
func IsRebalanceInProgress(err error) bool { return errors.Is(err, kerr.RebalanceInProgress) }
