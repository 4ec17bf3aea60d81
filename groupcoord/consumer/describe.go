package consumer

import (
	"maps"
	"math"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// MemberTypeConsumer is ConsumerGroupDescribe v1's MemberType of a member
// speaking the consumer protocol (0 is classic, -1 unknown).
const MemberTypeConsumer int8 = 1

// MemberTypeClassic is the MemberType of a member speaking the classic
// protocol in a consumer group.
const MemberTypeClassic int8 = 0

// Describe is the group as ConsumerGroupDescribe (API key 69) shows it
// (ConsumerGroup.asDescribedGroup): its state, epochs, the assignor it
// uses, and each member, in member id order, with its assignment (its
// assigned partitions and those pending revocation) and its target, topics
// no longer known left out. AuthorizedOperations is Kafka's "not asked"
// (INT32_MIN); the caller fills it in when asked, and answers errors
// (INVALID_GROUP_ID, GROUP_ID_NOT_FOUND, authorization) itself.
func (g *Group) Describe(cfg Config, topics Topics) kmsg.ConsumerGroupDescribeResponseGroup {
	d := kmsg.NewConsumerGroupDescribeResponseGroup()
	d.Group, d.State, d.Epoch, d.AssignmentEpoch = g.ID, string(g.State()), g.Epoch, g.AssignmentEpoch
	d.AssignorName = g.preferredAssignor(cfg, nil, nil)
	d.AuthorizedOperations = math.MinInt32
	for _, id := range slices.Sorted(maps.Keys(g.Members)) {
		m := g.Members[id]
		dm := kmsg.NewConsumerGroupDescribeResponseGroupMember()
		dm.MemberID, dm.MemberEpoch, dm.ClientID, dm.ClientHost = id, m.MemberEpoch, m.ClientID, m.ClientHost
		if m.InstanceID != "" {
			dm.InstanceID = &m.InstanceID
		}
		if m.RackID != "" {
			dm.RackID = &m.RackID
		}
		dm.SubscribedTopicRegex = &m.Regex // "" without one, as Kafka answers
		dm.SubscribedTopics = slices.Clone(m.Topics)
		if dm.SubscribedTopics == nil {
			dm.SubscribedTopics = []string{}
		}
		owned := map[string][]int32{} // assigned and pending revocation
		for _, p := range []Partitions{m.Assigned, m.PendingRevocation} {
			for t, ps := range p {
				owned[t] = append(owned[t], slices.Collect(maps.Keys(ps))...)
			}
		}
		dm.Assignment = describeAssignment(topics, owned)
		dm.TargetAssignment = describeAssignment(topics, g.Target[id])
		dm.MemberType = MemberTypeConsumer
		if m.Classic != nil {
			dm.MemberType = MemberTypeClassic
		}
		d.Members = append(d.Members, dm)
	}
	if d.Members == nil {
		d.Members = []kmsg.ConsumerGroupDescribeResponseGroupMember{}
	}
	return d
}

// describeAssignment builds an assignment of topics (name, id, sorted
// partitions; by name), leaving out the topics no longer known.
func describeAssignment(topics Topics, assigned map[string][]int32) kmsg.Assignment {
	a := kmsg.NewAssignment()
	a.TopicPartitions = []kmsg.AssignmentTopicPartition{}
	for _, t := range slices.Sorted(maps.Keys(assigned)) {
		id, ok := topics.ID(t)
		if !ok || len(assigned[t]) == 0 {
			continue
		}
		tp := kmsg.NewAssignmentTopicPartition()
		tp.TopicID, tp.Topic, tp.Partitions = id, t, slices.Sorted(slices.Values(assigned[t]))
		a.TopicPartitions = append(a.TopicPartitions, tp)
	}
	return a
}

// Listed is the group as ListGroups (API key 16) lists it
// (ModernGroup.asListedGroup): protocol type "consumer", its state as
// ConsumerGroupDescribe shows it (GroupState, v4+; StatesFilter matches it
// case-insensitively) and group type "consumer" (v5).
func (g *Group) Listed() kmsg.ListGroupsResponseGroup {
	l := kmsg.NewListGroupsResponseGroup()
	l.Group, l.ProtocolType, l.GroupState, l.GroupType = g.ID, "consumer", string(g.State()), "consumer"
	return l
}
