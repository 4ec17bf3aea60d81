package consumer

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"
)

// stateVersion is the version of the saved form of a group (savedGroup).
const stateVersion = 1

// savedGroup is a consumer group as it is saved (docs/consumer-protocol.md
// §10.2: one blob per group, written before a heartbeat that changed it is
// answered): everything but what is derived on load (the static member
// index, the partition owners, the state).
type savedGroup struct {
	Type            string                        `json:"type"` // "consumer": a classic group's blob has none
	Version         int                           `json:"version"`
	ID              string                        `json:"id"`
	Epoch           int32                         `json:"epoch"`
	AssignmentEpoch int32                         `json:"assignment_epoch"`
	MetadataHash    uint64                        `json:"metadata_hash"`
	Members         []savedMember                 `json:"members"`
	Target          map[string]map[string][]int32 `json:"target,omitempty"`
}

type savedMember struct {
	ID                  string     `json:"id"`
	InstanceID          string     `json:"instance_id,omitempty"`
	RackID              string     `json:"rack_id,omitempty"`
	ClientID            string     `json:"client_id"`
	ClientHost          string     `json:"client_host"`
	Topics              []string   `json:"topics"`
	ServerAssignor      string     `json:"server_assignor,omitempty"`
	Regex               string     `json:"regex,omitempty"`
	RebalanceTimeoutMs  int64      `json:"rebalance_timeout_ms"`
	MemberEpoch         int32      `json:"member_epoch"`
	PreviousMemberEpoch int32      `json:"previous_member_epoch"`
	State               int8       `json:"state"`
	Assigned            Partitions `json:"assigned,omitempty"`
	PendingRevocation   Partitions `json:"pending_revocation,omitempty"`
	// Classic: a member speaking the classic protocol (ClassicMemberMetadata).
	Classic *savedClassic `json:"classic,omitempty"`
}

type savedClassic struct {
	SessionTimeoutMs int64             `json:"session_timeout_ms"`
	Protocols        []ClassicProtocol `json:"protocols"`
}

// IsConsumerGroupState reports whether data is a consumer group saved by
// MarshalState (a classic group's saved state is not).
func IsConsumerGroupState(data []byte) bool {
	var probe struct {
		Type string `json:"type"`
	}
	return json.Unmarshal(data, &probe) == nil && probe.Type == "consumer"
}

// MarshalState returns the group in its saved form (JSON, versioned),
// members in member id order.
func (g *Group) MarshalState() ([]byte, error) {
	s := savedGroup{Type: "consumer", Version: stateVersion, ID: g.ID, Epoch: g.Epoch, AssignmentEpoch: g.AssignmentEpoch,
		MetadataHash: g.MetadataHash, Target: g.Target, Members: []savedMember{}}
	for _, id := range slices.Sorted(maps.Keys(g.Members)) {
		m := g.Members[id]
		s.Members = append(s.Members, savedMember{ID: id, InstanceID: m.InstanceID, RackID: m.RackID, ClientID: m.ClientID,
			ClientHost: m.ClientHost, Topics: m.Topics, ServerAssignor: m.ServerAssignor, Regex: m.Regex, RebalanceTimeoutMs: m.RebalanceTimeout.Milliseconds(),
			MemberEpoch: m.MemberEpoch, PreviousMemberEpoch: m.PreviousMemberEpoch, State: int8(m.State),
			Assigned: m.Assigned, PendingRevocation: m.PendingRevocation})
		if m.Classic != nil {
			s.Members[len(s.Members)-1].Classic = &savedClassic{SessionTimeoutMs: m.Classic.SessionTimeout.Milliseconds(), Protocols: m.Classic.Protocols}
		}
	}
	return json.Marshal(s)
}

// LoadGroup rebuilds a group from MarshalState's form: the derived indexes
// too (instance ids, partition owners). A state this version does not know
// loads as Unknown (its member is fenced at its next heartbeat unless it
// owns nothing, as Kafka does). Errors: data that is not a consumer group's
// saved state, or not a coherent one (a member id or instance id twice, a
// negative partition or timeout).
func LoadGroup(data []byte) (*Group, error) {
	var s savedGroup
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("consumer group state: %w", err)
	}
	if s.Type != "consumer" {
		return nil, errors.New("consumer group state: not a consumer group's")
	}
	if s.Version != stateVersion {
		return nil, fmt.Errorf("consumer group state: version %d, want %d", s.Version, stateVersion)
	}
	g := NewGroup(s.ID)
	g.Epoch, g.AssignmentEpoch, g.MetadataHash = s.Epoch, s.AssignmentEpoch, s.MetadataHash
	g.hashEpoch = g.Epoch // not saved: a member moving past it after a restart gets its assignment
	for _, sm := range s.Members {
		if _, dup := g.Members[sm.ID]; dup {
			return nil, fmt.Errorf("consumer group state of %s: member %s twice", s.ID, sm.ID)
		}
		if _, dup := g.static[sm.InstanceID]; dup && sm.InstanceID != "" {
			return nil, fmt.Errorf("consumer group state of %s: instance id %s twice", s.ID, sm.InstanceID)
		}
		if !validPartitions(sm.Assigned) || !validPartitions(sm.PendingRevocation) {
			return nil, fmt.Errorf("consumer group state of %s: member %s: a negative partition", s.ID, sm.ID)
		}
		for _, p := range []Partitions{sm.Assigned, sm.PendingRevocation} {
			for t, ps := range p {
				for part := range ps {
					if _, taken := g.owners[tp{t, part}]; taken {
						return nil, fmt.Errorf("consumer group state of %s: partition %s-%d held by two members", s.ID, t, part)
					}
				}
			}
		}
		state := MemberState(sm.State)
		if state != Stable && state != UnrevokedPartitions && state != UnreleasedPartitions {
			state = Unknown
		}
		var classic *ClassicMetadata
		if sm.Classic != nil {
			if len(sm.Classic.Protocols) == 0 || sm.Classic.SessionTimeoutMs <= 0 || sm.Classic.SessionTimeoutMs > math.MaxInt64/int64(time.Millisecond) {
				return nil, fmt.Errorf("consumer group state of %s: member %s: classic metadata without protocols or session timeout", s.ID, sm.ID)
			}
			classic = &ClassicMetadata{SessionTimeout: time.Duration(sm.Classic.SessionTimeoutMs) * time.Millisecond, Protocols: sm.Classic.Protocols}
		}
		g.put(&GroupMember{Classic: classic, Member: Member{ID: sm.ID, MemberEpoch: sm.MemberEpoch, PreviousMemberEpoch: sm.PreviousMemberEpoch,
			State: state, Assigned: sm.Assigned.compact(), PendingRevocation: sm.PendingRevocation.compact()},
			InstanceID: sm.InstanceID, RackID: sm.RackID, ClientID: sm.ClientID, ClientHost: sm.ClientHost,
			Topics: slices.Compact(slices.Sorted(slices.Values(sm.Topics))), ServerAssignor: sm.ServerAssignor, Regex: sm.Regex,
			RebalanceTimeout: time.Duration(min(max(sm.RebalanceTimeoutMs, math.MinInt64/int64(time.Millisecond)), math.MaxInt64/int64(time.Millisecond))) * time.Millisecond})
	}
	for id, t := range s.Target {
		if _, ok := g.Members[id]; !ok {
			continue // a departed member's target: dropped at its removal, so never saved; ignore
		}
		for _, ps := range t {
			if slices.ContainsFunc(ps, func(p int32) bool { return p < 0 }) {
				return nil, fmt.Errorf("consumer group state of %s: member %s: a negative partition in its target", s.ID, id)
			}
		}
		g.Target[id] = t
	}
	return g, nil
}

// compact drops the topics of p without partitions; nil when none is
// left (as reconciliation leaves them).
func (p Partitions) compact() Partitions {
	for t, ps := range p {
		if len(ps) == 0 {
			delete(p, t)
		}
	}
	if len(p) == 0 {
		return nil
	}
	return p
}

func validPartitions(p Partitions) bool {
	for _, ps := range p {
		for part := range ps {
			if part < 0 {
				return false
			}
		}
	}
	return true
}

// Loaded returns the timers to arm for a group just loaded (GMM.onLoaded):
// every member's session, and the rebalance timer of members revoking.
func (g *Group) Loaded() Timers {
	var t Timers
	for _, id := range slices.Sorted(maps.Keys(g.Members)) {
		m := g.Members[id]
		t.Session = append(t.Session, id)
		if m.State == UnrevokedPartitions {
			t.Rebalance = append(t.Rebalance, RebalanceTimer{MemberID: id, Epoch: m.MemberEpoch, Timeout: m.RebalanceTimeout})
		}
	}
	return t
}
