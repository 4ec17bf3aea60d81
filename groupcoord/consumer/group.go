package consumer

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"hash/fnv"
	"maps"
	"math"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/disgw/disgw/groupcoord/assignor"
)

// Error is a request refused with a Kafka error code and the message
// Kafka gives with it (the response's ErrorMessage).
type Error struct {
	Code    *kerr.Error
	Message string
}

func (e *Error) Error() string { return e.Code.Message + ": " + e.Message }

// Unwrap makes errors.Is(err, kerr.X) work.
func (e *Error) Unwrap() error { return e.Code }

func errorf(code *kerr.Error, format string, args ...any) error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Member epochs with a meaning of their own in ConsumerGroupHeartbeat.
const (
	// JoinEpoch: the member joins (or rejoins after being fenced).
	JoinEpoch int32 = 0
	// LeaveEpoch: the member leaves the group.
	LeaveEpoch int32 = -1
	// StaticLeaveEpoch: a static member leaves for a while (a restart);
	// its instance id keeps its assignment until it comes back or its
	// session expires.
	StaticLeaveEpoch int32 = -2
)

// Config holds a consumer group's settings: Kafka's group.consumer.*
// broker configs (and the GROUP resource's overrides of them).
type Config struct {
	// SessionTimeout: a member that sends no heartbeat for this long is
	// fenced (group.consumer.session.timeout.ms, default 45 s).
	SessionTimeout time.Duration
	// HeartbeatInterval is what heartbeat responses tell members
	// (group.consumer.heartbeat.interval.ms, default 5 s).
	HeartbeatInterval time.Duration
	// MaxSize is the most members a group takes (group.consumer.max.size,
	// default unbounded); one more gets GROUP_MAX_SIZE_REACHED.
	MaxSize int
	// Assignors are the assignors members may name, the first the default
	// (group.consumer.assignors, default uniform then range).
	Assignors []assignor.Assignor
	// MigrationPolicy is group.consumer.migration.policy: which online
	// conversions between classic and consumer groups are allowed
	// (MigrationBidirectional, the default when "", MigrationUpgrade,
	// MigrationDowngrade, MigrationDisabled; classic.go).
	MigrationPolicy string
}

// DefaultConfig is Kafka 4.4's defaults.
func DefaultConfig() Config {
	return Config{SessionTimeout: 45 * time.Second, HeartbeatInterval: 5 * time.Second, MaxSize: math.MaxInt32,
		Assignors: []assignor.Assignor{assignor.Uniform(), assignor.Range()}}
}

func (c Config) assignor(name string) (assignor.Assignor, bool) {
	for _, a := range c.Assignors {
		if a.Name() == name {
			return a, true
		}
	}
	return nil, false
}

// Topics is what a group resolves subscriptions and owned partitions
// against: the topics that exist, their partition counts and topic ids.
type Topics interface {
	// Partitions returns the partition count of the topic; ok is false
	// when it does not exist.
	Partitions(topic string) (n int32, ok bool)
	// Names returns every topic the group's members may subscribe to by
	// regular expression (the caller leaves out what the heartbeat's
	// principal may not DESCRIBE), in any order.
	Names() []string
	// ID returns the topic's Kafka topic id; Name the topic of an id.
	ID(topic string) ([16]byte, bool)
	Name(id [16]byte) (string, bool)
}

// GroupMember is a member of a consumer group: its reconciliation state
// and what its heartbeats said of it.
type GroupMember struct {
	Member
	InstanceID string // group.instance.id; "" for a dynamic member
	RackID     string
	// RebalanceTimeout is how long the member has to revoke partitions
	// (UnrevokedPartitions) before it is fenced.
	RebalanceTimeout time.Duration
	ServerAssignor   string   // "" when the member names none
	Topics           []string // subscribed topic names, sorted
	// Regex is the member's SubscribedTopicRegex (RE2, matching whole
	// topic names); "" for none.
	Regex      string
	ClientID   string
	ClientHost string
	// Classic is set for a member that speaks the classic protocol
	// (JoinGroup, SyncGroup, Heartbeat; classic.go), nil for one that
	// speaks the consumer protocol.
	Classic *ClassicMetadata
}

func (m *GroupMember) reconciledTo(epoch int32) bool {
	return m.State == Stable && m.MemberEpoch == epoch
}

// State is a consumer group's state, as ConsumerGroupDescribe and
// ListGroups (type "consumer") show it.
type State string

// Kafka's ConsumerGroupState names.
const (
	Empty       State = "Empty"
	Assigning   State = "Assigning"
	Reconciling State = "Reconciling"
	StableState State = "Stable"
)

// RebalanceTimer is a timer the caller arms for a member that must revoke
// partitions: when it fires, RebalanceExpired.
type RebalanceTimer struct {
	MemberID string
	Epoch    int32
	Timeout  time.Duration
}

// Timers are the timers a call changed: the caller (re)arms the session
// timers of Session (Config.SessionTimeout; on expiry, Fence), arms
// Rebalance, and stops the rebalance timers of EndRebalance and every
// timer of Cancel (members that left).
type Timers struct {
	Session      []string
	Rebalance    []RebalanceTimer
	EndRebalance []string
	Cancel       []string
}

// Group is one consumer group's state (Kafka's ConsumerGroup) and the
// heartbeat protocol over it (GroupMetadataManager.consumerGroupHeartbeat).
// Not safe for concurrent use: its coordinator serializes the calls.
type Group struct {
	ID string
	// Epoch is the group epoch, bumped whenever the target assignment
	// must be computed again; AssignmentEpoch the epoch of the target
	// assignment (Target) last computed.
	Epoch, AssignmentEpoch int32
	Members                map[string]*GroupMember
	// Target is the target assignment: member id → topic → partitions.
	Target map[string]map[string][]int32
	// MetadataHash is a hash of the subscribed topics and their partition
	// counts when the epoch was last bumped: a change bumps it again.
	MetadataHash uint64

	static map[string]string // instance id → member id
	owners map[tp]int32      // partition → member epoch of its owner
	// regexes: the resolutions of the members' regular expressions,
	// against the topic names of names (namesSum).
	regexes  map[string][]string
	namesSum uint64
	// topicMeta: the partition counts and ids metadataHash last read.
	topicMeta map[string]topicMeta
	// hashEpoch is the group epoch at which MetadataHash last changed
	// (the group's Epoch after a LoadGroup): a member whose epoch moves
	// past it is sent its assignment even when its partitions' names
	// did not change, as a topic of them may have been created again
	// under its name (a new topic id; Kafka compares assignments by id).
	hashEpoch int32
}

type tp struct {
	topic string
	part  int32
}

// NewGroup returns an empty group.
func NewGroup(id string) *Group {
	// Kafka 4.4 starts a group at epoch 1 with a target assignment of
	// epoch 1 (ModernGroup's groupEpoch.set(1), TargetAssignmentMetadata.
	// INITIAL): its first member's subscription makes epoch 2.
	return &Group{ID: id, Epoch: 1, AssignmentEpoch: 1, Members: map[string]*GroupMember{}, Target: map[string]map[string][]int32{},
		static: map[string]string{}, owners: map[tp]int32{}, regexes: map[string][]string{}}
}

// State is the group's state (ConsumerGroup.maybeUpdateGroupState).
func (g *Group) State() State {
	switch {
	case len(g.Members) == 0:
		return Empty
	case g.Epoch > g.AssignmentEpoch:
		return Assigning
	}
	for _, m := range g.Members {
		if !m.reconciledTo(g.AssignmentEpoch) {
			return Reconciling
		}
	}
	return StableState
}

// ValidateHeartbeat applies the checks Kafka makes before a heartbeat
// reaches its group (GroupCoordinatorService.
// throwIfConsumerGroupHeartbeatRequestIsInvalid): errors are *Error
// with kerr.InvalidRequest or kerr.UnsupportedAssignor and Kafka's
// message.
func ValidateHeartbeat(cfg Config, req *kmsg.ConsumerGroupHeartbeatRequest) error {
	invalid := func(msg string) error { return errorf(kerr.InvalidRequest, "%s", msg) }
	blank := func(s string) bool { return strings.TrimSpace(s) == "" }
	if (req.Version >= 1 || req.MemberEpoch > 0 || req.MemberEpoch == LeaveEpoch) && blank(req.MemberID) {
		return invalid("MemberId can't be empty.")
	}
	switch {
	case blank(req.Group):
		return invalid("GroupId can't be empty.")
	case req.InstanceID != nil && blank(*req.InstanceID):
		return invalid("InstanceId can't be empty.")
	case req.RackID != nil && blank(*req.RackID):
		return invalid("RackId can't be empty.")
	}
	switch {
	case req.MemberEpoch == JoinEpoch:
		if req.RebalanceTimeoutMillis == -1 {
			return invalid("RebalanceTimeoutMs must be provided in first request.")
		}
		if req.Topics == nil || len(req.Topics) > 0 {
			return invalid("TopicPartitions must be empty when (re-)joining.")
		}
		if req.SubscribedTopicNames == nil && req.SubscribedTopicRegex == nil {
			return invalid("Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.")
		}
	case req.MemberEpoch == StaticLeaveEpoch:
		if req.InstanceID == nil {
			return invalid("InstanceId can't be null.")
		}
	case req.MemberEpoch < StaticLeaveEpoch:
		return invalid("MemberEpoch is invalid.")
	}
	if req.ServerAssignor != nil {
		if _, ok := cfg.assignor(*req.ServerAssignor); !ok {
			names := make([]string, len(cfg.Assignors))
			for i, a := range cfg.Assignors {
				names[i] = a.Name()
			}
			return errorf(kerr.UnsupportedAssignor, "ServerAssignor %s is not supported. Supported assignors: %s.",
				*req.ServerAssignor, strings.Join(names, ", "))
		}
	}
	return nil
}

// NewMemberID returns a member id as Kafka makes one (Uuid.randomUuid:
// 16 random bytes, URL-safe base64 without padding).
func NewMemberID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// Heartbeat serves a ConsumerGroupHeartbeat (API key 68) that passed
// ValidateHeartbeat, for a group that exists (the caller creates it for a
// join, epoch 0, and answers GROUP_ID_NOT_FOUND otherwise). clientID and
// clientHost are the connection's. It returns the response (ErrorCode
// left 0) and the timers to change; errors are *Error, with Kafka's code
// and message: UnknownMemberID, FencedMemberEpoch, UnreleasedInstanceID,
// FencedInstanceID, GroupMaxSizeReached, InvalidRegularExpression. A
// refused heartbeat changes nothing.
func (g *Group) Heartbeat(cfg Config, topics Topics, req *kmsg.ConsumerGroupHeartbeatRequest, clientID, clientHost string) (*kmsg.ConsumerGroupHeartbeatResponse, Timers, error) {
	if req.MemberEpoch == LeaveEpoch || req.MemberEpoch == StaticLeaveEpoch {
		return g.leave(req)
	}
	if req.SubscribedTopicRegex != nil && *req.SubscribedTopicRegex != "" {
		if _, err := compileRegex(*req.SubscribedTopicRegex); err != nil {
			return nil, Timers{}, errorf(kerr.InvalidRegularExpression, "SubscribedTopicRegex `%s` is not a valid regular expression: %v.", *req.SubscribedTopicRegex, err)
		}
	}
	owned := ownedNames(topics, req.Topics)
	instance := ""
	if req.InstanceID != nil {
		instance = *req.InstanceID
	}
	memberID := req.MemberID
	if err := g.checkFull(cfg, memberID, instance); err != nil {
		return nil, Timers{}, err
	}
	if memberID == "" {
		memberID = NewMemberID()
	}
	member, replaced, err := g.member(memberID, instance, req.MemberEpoch, owned)
	if err != nil {
		return nil, Timers{}, err
	}
	if known := member.State == Stable || member.State == UnrevokedPartitions || member.State == UnreleasedPartitions; !known && (owned == nil || len(owned) > 0) {
		// What Reconcile would refuse, refused before anything changes
		// (Kafka writes nothing for a heartbeat that fails).
		return nil, Timers{}, errorf(kerr.FencedMemberEpoch, "The consumer group member is in a unknown state. The member must abandon all its partitions and rejoin.")
	}

	updated := *member
	updated.ID = memberID
	if instance != "" {
		updated.InstanceID = instance
	}
	if req.RackID != nil {
		updated.RackID = *req.RackID
	}
	if req.RebalanceTimeoutMillis != -1 {
		updated.RebalanceTimeout = time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond
	}
	if req.ServerAssignor != nil {
		updated.ServerAssignor = *req.ServerAssignor
	}
	if req.SubscribedTopicNames != nil {
		updated.Topics = slices.Compact(slices.Sorted(slices.Values(req.SubscribedTopicNames)))
	}
	if req.SubscribedTopicRegex != nil {
		updated.Regex = *req.SubscribedTopicRegex
	}
	updated.ClientID, updated.ClientHost = clientID, clientHost
	updated.Classic = nil // it speaks the consumer protocol now (a classic static member it replaced did not)
	subscriptionChanged := !slices.Equal(updated.Topics, member.Topics) || updated.Regex != member.Regex
	old := member // the stored member the update replaces; for a static member rejoining under a new id, the one it replaces
	if replaced != "" {
		old = g.Members[replaced]
	}
	assignorChanged := g.preferredAssignor(cfg, nil, nil) != g.preferredAssignor(cfg, old, &updated)

	updated, timers := g.update(cfg, topics, updated, replaced, subscriptionChanged, subscriptionChanged || assignorChanged, owned)

	resp := kmsg.NewPtrConsumerGroupHeartbeatResponse()
	resp.Version = req.Version
	resp.MemberID = &memberID
	resp.MemberEpoch = updated.MemberEpoch
	resp.HeartbeatIntervalMillis = int32(cfg.HeartbeatInterval / time.Millisecond)
	full := req.RebalanceTimeoutMillis != -1 && (req.SubscribedTopicNames != nil || req.SubscribedTopicRegex != nil) && req.Topics != nil
	// Kafka sends the assignment when it changed, by topic id: so also
	// when a topic was created again under its name, which changes the
	// metadata hash; this sends it when the member's epoch moves past
	// the epoch of a hash change (hashEpoch), which may also be a
	// subscription to another topic (a client takes the full set each
	// time; this costs a few bytes).
	movedPastHash := member.MemberEpoch < g.hashEpoch && updated.MemberEpoch >= g.hashEpoch
	if req.MemberEpoch == JoinEpoch || full || !equalPartitions(member.Assigned, updated.Assigned) || movedPastHash {
		resp.Assignment = assignmentOf(topics, updated.Assigned)
	}
	return resp, timers, nil
}

// update stores a member's new state and moves the group with it, for a
// heartbeat and a classic JoinGroup alike: a static member's predecessor
// (replaced) gives way, its target carried over; regular expressions are
// resolved again; the group epoch moves when bump is set or the
// subscribed topics' metadata hash changed; the target assignment is
// computed again when the epoch moved past it; and the member is
// reconciled towards it with the partitions it says it owns (owned; nil:
// not said). It returns the member as stored and the timers to change.
// The caller has refused a member in an unknown state that owns
// partitions (Reconcile's only error).
func (g *Group) update(cfg Config, topics Topics, updated GroupMember, replaced string, subscriptionChanged, bump bool, owned map[string][]int32) (GroupMember, Timers) {
	memberID := updated.ID
	var timers Timers
	if replaced != "" {
		// replaceMember: the new member id takes the static member's
		// place, its assignment and its target.
		target := g.Target[replaced]
		g.remove(replaced)
		g.Target[memberID] = target
		timers.Cancel = append(timers.Cancel, replaced)
	}
	g.put(&updated)
	g.resolveRegexes(topics)
	// The group epoch moves when a subscription or the preferred
	// assignor changed, or the subscribed topics' partitions did, or the
	// topics a regular expression matches (updateSubscriptionMetadata;
	// Kafka notices a topic change at its next metadata image and
	// resolves regular expressions in the background, at most every
	// 10 s; this does both at the group's next heartbeat).
	if hash := g.metadataHash(topics); bump || hash != g.MetadataHash {
		g.Epoch++
		if hash != g.MetadataHash {
			g.hashEpoch = g.Epoch
		}
		g.MetadataHash = hash
	}
	g.updateTarget(cfg, topics)

	if subscriptionChanged || !updated.reconciledTo(g.AssignmentEpoch) {
		next, err := Reconcile(updated.Member, Reconciliation{
			TargetEpoch: g.AssignmentEpoch, Target: g.Target[memberID], SubscriptionChanged: subscriptionChanged,
			Subscribed: func(t string) bool {
				_, exists := topics.Partitions(t)
				return exists && (slices.Contains(updated.Topics, t) || slices.Contains(g.regexes[updated.Regex], t))
			},
			PartitionEpoch: g.partitionEpoch, Owned: owned,
		})
		if err != nil {
			panic(err) // refused by the caller: a member in an unknown state owning partitions
		}
		if !equalMember(next, updated.Member) {
			reconciled := updated // a new value: put disowns the stored one's partitions
			reconciled.Member = next
			g.put(&reconciled)
			updated = reconciled
			if next.State == UnrevokedPartitions {
				timers.Rebalance = append(timers.Rebalance, RebalanceTimer{MemberID: memberID, Epoch: next.MemberEpoch, Timeout: updated.RebalanceTimeout})
			} else {
				timers.EndRebalance = append(timers.EndRebalance, memberID)
			}
		}
	}
	timers.Session = append(timers.Session, memberID)
	return updated, timers
}

// ownedNames turns a heartbeat's owned partitions (by topic id) into
// names; nil stays nil (not sent). A topic id no longer known is passed
// over (its partitions are gone).
func ownedNames(topics Topics, ts []kmsg.ConsumerGroupHeartbeatRequestTopic) map[string][]int32 {
	if ts == nil {
		return nil
	}
	out := make(map[string][]int32, len(ts))
	for _, t := range ts {
		name, ok := topics.Name(t.TopicID)
		if !ok {
			continue
		}
		out[name] = append(out[name], t.Partitions...)
	}
	return out
}

// checkFull refuses a new member of a full group
// (throwIfConsumerGroupIsFull); a static member coming back is not new.
func (g *Group) checkFull(cfg Config, memberID, instance string) error {
	if _, ok := g.static[instance]; ok && instance != "" {
		return nil
	}
	if _, ok := g.Members[memberID]; len(g.Members) >= cfg.MaxSize && (memberID == "" || !ok) {
		return errorf(kerr.GroupMaxSizeReached, "The consumer group has reached its maximum capacity of %d members.", cfg.MaxSize)
	}
	return nil
}

// member finds or makes the heartbeat's member
// (getOrMaybeSubscribe{Dynamic,Static}ConsumerGroupMember): a copy of it,
// and for a static member rejoining under a new member id, the id of the
// member it replaces (its assignment carried over, at epoch 0).
func (g *Group) member(memberID, instance string, epoch int32, owned map[string][]int32) (m *GroupMember, replaced string, err error) {
	joining := epoch == JoinEpoch
	if instance == "" {
		if cur, ok := g.Members[memberID]; ok {
			c := *cur
			return &c, "", checkEpoch(cur, epoch, owned)
		}
		if !joining {
			return nil, "", errorf(kerr.UnknownMemberID, "Member %s is not a member of group %s.", memberID, g.ID)
		}
		return newMember(memberID), "", nil
	}
	prevID, ok := g.static[instance]
	if ok && g.Members[prevID] == nil {
		ok = false // not possible while put and remove keep the index; never dereference a missing member
	}
	if joining {
		if !ok {
			if cur, ok := g.Members[memberID]; ok { // a dynamic member becoming static
				c := *cur
				return &c, "", nil
			}
			return newMember(memberID), "", nil
		}
		prev := g.Members[prevID]
		// A classic static member is replaced at once: it sends no leave
		// when it restarts with the consumer protocol (Kafka checks
		// throwIfInstanceIdIsUnreleased only between consumer-protocol
		// members).
		if prev.MemberEpoch != StaticLeaveEpoch && prev.Classic == nil {
			return nil, "", errorf(kerr.UnreleasedInstanceID, "Static member %s with instance id %s cannot join the group because the instance id is owned by %s member.",
				memberID, instance, prevID)
		}
		c := *prev
		c.ID, c.MemberEpoch, c.PreviousMemberEpoch = memberID, 0, 0
		if prevID == memberID {
			return &c, "", nil
		}
		return &c, prevID, nil
	}
	if !ok {
		return nil, "", errorf(kerr.UnknownMemberID, "Instance id %s is unknown.", instance)
	}
	if prevID != memberID {
		return nil, "", errorf(kerr.FencedInstanceID, "Static member %s with instance id %s was fenced by member %s.", memberID, instance, prevID)
	}
	cur := g.Members[prevID]
	c := *cur
	return &c, "", checkEpoch(cur, epoch, owned)
}

// newMember is a member joining: epoch 0, previous epoch -1, Stable,
// nothing assigned (ConsumerGroup.getOrMaybeCreateMember).
func newMember(id string) *GroupMember {
	return &GroupMember{Member: Member{ID: id, PreviousMemberEpoch: -1}}
}

// checkEpoch is throwIfConsumerGroupMemberEpochIsInvalid: a heartbeat
// from a greater epoch than the member's, or a smaller one but for its
// previous epoch while owning only partitions it still has, is fenced.
func checkEpoch(m *GroupMember, epoch int32, owned map[string][]int32) error {
	switch {
	case epoch == JoinEpoch:
		return nil
	case epoch > m.MemberEpoch:
		return errorf(kerr.FencedMemberEpoch, "The consumer group member has a greater member epoch (%d) than the one known by the group coordinator (%d). The member must abandon all its partitions and rejoin.",
			epoch, m.MemberEpoch)
	case epoch < m.MemberEpoch && !(epoch == m.PreviousMemberEpoch && ownsOnly(owned, m.Assigned)):
		return errorf(kerr.FencedMemberEpoch, "The consumer group member has a smaller member epoch (%d) than the one known by the group coordinator (%d). The member must abandon all its partitions and rejoin.",
			epoch, m.MemberEpoch)
	}
	return nil
}

// ownsOnly reports whether owned was sent and holds only partitions of
// assigned (isSubset).
func ownsOnly(owned map[string][]int32, assigned Partitions) bool {
	if owned == nil {
		return false
	}
	for t, ps := range owned {
		a, ok := assigned[t]
		if !ok {
			return false
		}
		for _, p := range ps {
			if _, ok := a[p]; !ok {
				return false
			}
		}
	}
	return true
}

// leave serves a heartbeat with epoch -1 (leave) or -2 (a static member
// leaving for a while) (consumerGroupLeave).
func (g *Group) leave(req *kmsg.ConsumerGroupHeartbeatRequest) (*kmsg.ConsumerGroupHeartbeatResponse, Timers, error) {
	resp := kmsg.NewPtrConsumerGroupHeartbeatResponse()
	resp.Version = req.Version
	memberID := req.MemberID
	resp.MemberID, resp.MemberEpoch = &memberID, req.MemberEpoch
	if req.InstanceID == nil {
		if _, ok := g.Members[memberID]; !ok {
			return nil, Timers{}, errorf(kerr.UnknownMemberID, "Member %s is not a member of group %s.", memberID, g.ID)
		}
		return resp, g.Fence(memberID), nil
	}
	instance := *req.InstanceID
	prevID, ok := g.static[instance]
	if !ok || g.Members[prevID] == nil {
		return nil, Timers{}, errorf(kerr.UnknownMemberID, "Instance id %s is unknown.", instance)
	}
	if prevID != memberID {
		return nil, Timers{}, errorf(kerr.FencedInstanceID, "Static member %s with instance id %s was fenced by member %s.", memberID, instance, prevID)
	}
	if req.MemberEpoch == StaticLeaveEpoch {
		// consumerGroupStaticMemberGroupLeave: the member keeps its
		// place and its partitions (their epochs reset to 0) until it
		// comes back or its session expires.
		m := *g.Members[memberID]
		m.MemberEpoch, m.PendingRevocation = StaticLeaveEpoch, nil
		m.Assigned = m.Assigned.clone()
		for _, ps := range m.Assigned {
			for p := range ps {
				ps[p] = 0
			}
		}
		g.put(&m)
		return resp, Timers{}, nil
	}
	return resp, g.Fence(memberID), nil
}

// Fence removes a member (it left, its session expired, or it did not
// revoke in time) and bumps the group epoch (consumerGroupFenceMembers);
// the last member leaving also ends the target assignment at that epoch.
// A member that is not there changes nothing.
func (g *Group) Fence(memberID string) Timers { return g.FenceMembers([]string{memberID}) }

// FenceMembers removes members together, with one group epoch bump
// (consumerGroupFenceMembers, as a classic LeaveGroup of several members
// does); the ids not members are passed over.
func (g *Group) FenceMembers(ids []string) Timers {
	var t Timers
	for _, id := range ids {
		if _, ok := g.Members[id]; ok {
			g.remove(id)
			t.Cancel = append(t.Cancel, id)
		}
	}
	if len(t.Cancel) == 0 {
		return Timers{}
	}
	g.Epoch++
	if g.topicMeta != nil { // nil just after LoadGroup: the next heartbeat hashes it
		if hash := g.hashOf(g.topicMeta); hash != g.MetadataHash { // without the member's subscriptions, as consumerGroupFenceMembers
			g.MetadataHash, g.hashEpoch = hash, g.Epoch
		}
	}
	if len(g.Members) == 0 {
		g.AssignmentEpoch = g.Epoch
	}
	return t
}

// RebalanceExpired is the rebalance timer of a member that was to revoke
// partitions at epoch: still at that epoch, it is fenced.
func (g *Group) RebalanceExpired(memberID string, epoch int32) Timers {
	if m, ok := g.Members[memberID]; ok && m.MemberEpoch == epoch {
		return g.Fence(memberID)
	}
	return Timers{}
}

// put stores m, keeping the static member index and the partition owners
// up to date. m must not be the value stored (its partitions are disowned
// as they were stored).
func (g *Group) put(m *GroupMember) {
	if old, ok := g.Members[m.ID]; ok {
		g.disown(old)
		if old.InstanceID != "" && old.InstanceID != m.InstanceID && g.static[old.InstanceID] == m.ID {
			delete(g.static, old.InstanceID) // its instance id changed (ConsumerGroup.maybeUpdateStaticMember)
		}
	}
	g.Members[m.ID] = m
	if m.InstanceID != "" {
		g.static[m.InstanceID] = m.ID
	}
	for t, ps := range m.Assigned {
		for p := range ps {
			g.owners[tp{t, p}] = m.MemberEpoch
		}
	}
	for t, ps := range m.PendingRevocation {
		for p := range ps {
			g.owners[tp{t, p}] = m.MemberEpoch
		}
	}
}

func (g *Group) disown(m *GroupMember) {
	for t, ps := range m.Assigned {
		for p := range ps {
			delete(g.owners, tp{t, p})
		}
	}
	for t, ps := range m.PendingRevocation {
		for p := range ps {
			delete(g.owners, tp{t, p})
		}
	}
}

// remove drops a member, its target assignment and its partitions.
func (g *Group) remove(memberID string) {
	m, ok := g.Members[memberID]
	if !ok {
		return
	}
	g.disown(m)
	delete(g.Members, memberID)
	delete(g.Target, memberID)
	if m.InstanceID != "" && g.static[m.InstanceID] == memberID {
		delete(g.static, m.InstanceID)
	}
	if m.Regex != "" && !slices.ContainsFunc(slices.Collect(maps.Values(g.Members)), func(o *GroupMember) bool { return o.Regex == m.Regex }) {
		delete(g.regexes, m.Regex)
	}
}

// compileRegex compiles a SubscribedTopicRegex as Kafka matches it: RE2
// (Kafka's RE2/J), against whole topic names.
func compileRegex(re string) (*regexp.Regexp, error) {
	return regexp.Compile("^(?:" + re + ")$")
}

// resolveRegexes resolves the members' regular expressions against the
// topic names: a new one, and all of them when the names changed
// (GMM.maybeUpdateRegularExpressions and its background resolution). A
// regular expression no member uses any more is forgotten.
func (g *Group) resolveRegexes(topics Topics) {
	used := map[string]bool{}
	for _, m := range g.Members {
		if m.Regex != "" {
			used[m.Regex] = true
		}
	}
	for re := range g.regexes {
		if !used[re] {
			delete(g.regexes, re)
		}
	}
	if len(used) == 0 {
		return
	}
	names := slices.Sorted(slices.Values(topics.Names()))
	h := fnv.New64a()
	for _, n := range names {
		h.Write([]byte(n))
		h.Write([]byte{0})
	}
	changed := h.Sum64() != g.namesSum
	g.namesSum = h.Sum64()
	for re := range used {
		if _, ok := g.regexes[re]; ok && !changed {
			continue
		}
		var matched []string
		if r, err := compileRegex(re); err == nil { // checked when subscribed; a saved one may not be
			for _, n := range names {
				if r.MatchString(n) {
					matched = append(matched, n)
				}
			}
		}
		g.regexes[re] = matched
	}
}

// SubscribedTopics returns the topics the members subscribe to, by name
// or regular expression (OffsetDelete refuses these with
// GROUP_SUBSCRIBED_TO_TOPIC).
func (g *Group) SubscribedTopics() map[string]bool {
	out := map[string]bool{}
	for _, m := range g.Members {
		for _, t := range g.subscribedTopics(m) {
			out[t] = true
		}
	}
	return out
}

// subscribedTopics are the topics member m subscribes to: its names and
// what its regular expression resolved to.
func (g *Group) subscribedTopics(m *GroupMember) []string {
	if m.Regex == "" {
		return m.Topics
	}
	all := append(slices.Clone(m.Topics), g.regexes[m.Regex]...)
	slices.Sort(all)
	return slices.Compact(all)
}

// partitionEpoch is the member epoch of the partition's owner, -1 when no
// member owns it.
func (g *Group) partitionEpoch(topic string, part int32) int32 {
	if e, ok := g.owners[tp{topic, part}]; ok {
		return e
	}
	return -1
}

// preferredAssignor is the assignor most members name, with old replaced
// by updated when given, else the default (computePreferredServerAssignor;
// ties go to the name first in alphabetical order).
func (g *Group) preferredAssignor(cfg Config, old, updated *GroupMember) string {
	counts := map[string]int{}
	for id, m := range g.Members {
		if old != nil && id == old.ID {
			continue
		}
		if m.ServerAssignor != "" {
			counts[m.ServerAssignor]++
		}
	}
	if updated != nil && updated.ServerAssignor != "" {
		counts[updated.ServerAssignor]++
	}
	best := ""
	for _, name := range slices.Sorted(maps.Keys(counts)) {
		if best == "" || counts[name] > counts[best] {
			best = name
		}
	}
	if best == "" && len(cfg.Assignors) > 0 {
		best = cfg.Assignors[0].Name()
	}
	return best
}

// metadataHash hashes the topics the members subscribe to that exist,
// with their partition counts.
//
// The hash covers each topic's id too (a topic deleted and created again
// under its name is a change), and is 0 when no subscribed topic exists, as
// Kafka's computeGroupHash. What it read is kept (topicMeta), so that
// Fence, which has no topics view, hashes the remaining subscriptions as
// Kafka does when it removes members.
func (g *Group) metadataHash(topics Topics) uint64 {
	g.topicMeta = map[string]topicMeta{}
	for _, t := range g.subscribedNames() {
		if n, ok := topics.Partitions(t); ok {
			id, _ := topics.ID(t)
			g.topicMeta[t] = topicMeta{n: n, id: id}
		}
	}
	return g.hashOf(g.topicMeta)
}

type topicMeta struct {
	n  int32
	id [16]byte
}

// subscribedNames are the sorted, distinct topics the members subscribe to.
func (g *Group) subscribedNames() []string {
	var names []string
	for _, m := range g.Members {
		names = append(names, g.subscribedTopics(m)...)
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// hashOf hashes the members' subscribed topics as meta describes them (0:
// none of them exists).
func (g *Group) hashOf(meta map[string]topicMeta) uint64 {
	h := fnv.New64a()
	n := 0
	for _, t := range g.subscribedNames() {
		if tm, ok := meta[t]; ok {
			fmt.Fprintf(h, "%s\x00%d\x00%x\x00", t, tm.n, tm.id)
			n++
		}
	}
	if n == 0 {
		return 0
	}
	return h.Sum64()
}

// updateTarget computes the target assignment again when the group epoch
// moved past it (maybeUpdateTargetAssignment), with the preferred
// assignor, from the previous target. Kafka 4.4 computes it at most once
// per consumer.assignment.interval.ms (1 s), a later heartbeat doing it
// once that passed; this computes it at once (no interval yet).
func (g *Group) updateTarget(cfg Config, topics Topics) {
	if g.AssignmentEpoch >= g.Epoch {
		return
	}
	a, ok := cfg.assignor(g.preferredAssignor(cfg, nil, nil))
	if !ok {
		a = cfg.Assignors[0]
	}
	members := make([]assignor.Member, 0, len(g.Members))
	partitions := map[string]int32{}
	for _, id := range slices.Sorted(maps.Keys(g.Members)) {
		m := g.Members[id]
		subs := g.subscribedTopics(m)
		members = append(members, assignor.Member{ID: id, InstanceID: m.InstanceID, Topics: subs, Current: g.Target[id]})
		for _, t := range subs {
			if n, ok := topics.Partitions(t); ok {
				partitions[t] = n
			}
		}
	}
	g.Target = a.Assign(members, partitions)
	g.AssignmentEpoch = g.Epoch
}

// assignmentOf is a member's assigned partitions as a heartbeat response
// carries them (by topic id, partitions ascending).
func assignmentOf(topics Topics, assigned Partitions) *kmsg.ConsumerGroupHeartbeatResponseAssignment {
	a := kmsg.NewConsumerGroupHeartbeatResponseAssignment()
	a.Topics = []kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic{}
	for _, t := range slices.Sorted(maps.Keys(assigned)) {
		id, ok := topics.ID(t)
		if !ok {
			continue
		}
		at := kmsg.NewConsumerGroupHeartbeatResponseAssignmentTopic()
		at.TopicID = id
		at.Partitions = slices.Sorted(maps.Keys(assigned[t]))
		a.Topics = append(a.Topics, at)
	}
	return &a
}

func equalPartitions(a, b Partitions) bool {
	if len(a) != len(b) {
		return false
	}
	for t, ps := range a {
		if !maps.Equal(ps, b[t]) {
			return false
		}
	}
	return true
}

func equalMember(a, b Member) bool {
	return a.ID == b.ID && a.MemberEpoch == b.MemberEpoch && a.PreviousMemberEpoch == b.PreviousMemberEpoch &&
		a.State == b.State && equalPartitions(a.Assigned, b.Assigned) && equalPartitions(a.PendingRevocation, b.PendingRevocation)
}
