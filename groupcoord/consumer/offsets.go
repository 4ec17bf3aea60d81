package consumer

import "github.com/twmb/franz-go/pkg/kerr"

// PartitionCheck checks one partition of an OffsetCommit (by topic name
// and partition) once the request as a whole was let through; nil is
// returned for every partition when there is nothing to check.
type PartitionCheck func(topic string, part int32) error

func noCheck(string, int32) error { return nil }

// ValidateOffsetCommit applies Kafka 4.4's member-epoch rules to an
// OffsetCommit (or TxnOffsetCommit, transactional) from memberID at
// memberEpoch, OffsetCommit request version version, to this group
// (ConsumerGroup.validateOffsetCommit, KIP-1251): a commit with a negative
// epoch to a group without members (an admin commit) passes, as does a
// transactional one with epoch -1 and no member id or instance id; the
// member must exist (UnknownMemberID), speak OffsetCommit v9+
// (UnsupportedVersion) and not be ahead of the group (StaleMemberEpoch).
// A commit at the member's epoch passes whole; one from an older epoch
// passes per partition (the returned check) for partitions the member
// holds or is revoking and was given at or before that epoch, else
// StaleMemberEpoch. A member speaking the classic protocol commits with
// any OffsetCommit version, and its epoch errors are IllegalGeneration.
// Errors are *Error with Kafka's message; any of them fails every
// partition of the request.
func (g *Group) ValidateOffsetCommit(memberID string, instanceID *string, memberEpoch int32, transactional bool, version int16) (PartitionCheck, error) {
	if memberEpoch < 0 && len(g.Members) == 0 {
		return noCheck, nil
	}
	if transactional && memberEpoch == LeaveEpoch && memberID == "" && instanceID == nil {
		return noCheck, nil
	}
	m, ok := g.Members[memberID]
	if !ok {
		return nil, errorf(kerr.UnknownMemberID, "Member %s is not a member of group %s.", memberID, g.ID)
	}
	classic := m.Classic != nil
	stale := func(consumerMsg, classicMsg string, args ...any) error {
		if classic {
			return errorf(kerr.IllegalGeneration, classicMsg, args...)
		}
		return errorf(kerr.StaleMemberEpoch, consumerMsg, args...)
	}
	if !transactional && !classic && version < 9 {
		return nil, errorf(kerr.UnsupportedVersion, "OffsetCommit version 9 or above must be used by members using the consumer group protocol")
	}
	switch {
	case memberEpoch == m.MemberEpoch:
		return noCheck, nil
	case memberEpoch > m.MemberEpoch:
		return nil, stale("Received member epoch %d is newer than current member epoch %d.", "Received generation id %d is newer than current member epoch %d.", memberEpoch, m.MemberEpoch)
	}
	assigned, pending := m.Assigned, m.PendingRevocation
	return func(topic string, part int32) error {
		epoch, ok := assigned[topic][part]
		if !ok {
			epoch, ok = pending[topic][part]
		}
		if !ok {
			return stale("Partition %s-%d is not assigned or pending revocation for member.", "Partition %s-%d is not assigned or pending revocation for member.", topic, part)
		}
		if memberEpoch < epoch {
			return stale("Received member epoch %d is older than assignment epoch %d for partition %s-%d.", "Received generation id %d is older than assignment epoch %d for partition %s-%d.", memberEpoch, epoch, topic, part)
		}
		return nil
	}, nil
}

// ValidateOffsetFetch applies the member-epoch rule of OffsetFetch v9+
// (ConsumerGroup.validateOffsetFetch): no member id and a negative epoch
// (an admin read) passes; otherwise the member must exist
// (UnknownMemberID) and be at exactly memberEpoch (StaleMemberEpoch).
// memberID nil: the request carried none.
func (g *Group) ValidateOffsetFetch(memberID *string, memberEpoch int32) error {
	if memberID == nil && memberEpoch < 0 {
		return nil
	}
	id := ""
	if memberID != nil {
		id = *memberID
	}
	m, ok := g.Members[id]
	if !ok {
		return errorf(kerr.UnknownMemberID, "Member %s is not a member of group %s.", id, g.ID)
	}
	if memberEpoch != m.MemberEpoch && m.Classic != nil {
		return errorf(kerr.IllegalGeneration, "The received generation id %d does not match the expected member epoch %d.", memberEpoch, m.MemberEpoch)
	}
	if memberEpoch != m.MemberEpoch {
		return errorf(kerr.StaleMemberEpoch, "The received member epoch %d does not match the expected member epoch %d.", memberEpoch, m.MemberEpoch)
	}
	return nil
}
