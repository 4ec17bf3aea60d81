package gateway

// GROUP config resources (resource type 32, kafka-configs --entity-type
// groups; docs/consumer-protocol.md §7.2): DescribeConfigs (API 32),
// IncrementalAlterConfigs (API 44), AlterConfigs (API 33, replacing every
// override) and ListConfigResources (API 74) serve
// Kafka 4.4's consumer group configs, whose values groupcoord keeps
// (groupcoord/groupconfig.go) and consumer groups use from their next
// heartbeat. Answers, errors and messages are Kafka 4.4's (its
// GroupConfig, ConfigHelper and ConfigAdminManager, checked against a
// one-node Kafka 4.4 broker):
//   - the group need not exist; an empty group name is INVALID_REQUEST
//     ("Group name must not be empty" to describe, "Default group resources
//     are not allowed." to alter);
//   - a value is an INT (spaces trimmed) at least 1 (0 for the assignment
//     interval), else INVALID_CONFIG "Invalid value V for configuration K:
//     Not a number of type INT" / "...: Value must be at least N"; then
//     within the broker's bounds (Kafka's group.consumer.min/max.*, whose
//     defaults disgw has), else INVALID_CONFIG "K must be in the range MIN
//     to MAX inclusive.";
//   - a null SET is INVALID_REQUEST "Null value not supported for : K";
//     APPEND and SUBTRACT are INVALID_CONFIG "Can't APPEND to key K because
//     its type is not LIST."; an unknown key is INVALID_CONFIG "Unknown
//     group config name: K" to SET, and accepted to DELETE.
//
// Kafka 4.4 also has the share groups' (share.*, errors.deadletterqueue.*)
// and streams groups' (streams.*) GROUP configs, and the internal
// consumer.assignor.offload.enable. disgw serves neither share nor streams
// groups, so it neither lists them nor stores them: setting one is
// INVALID_CONFIG saying so, rather than a value accepted that would change
// nothing. Kafka's check that the session timeout exceeds the heartbeat
// interval cannot fail within the bounds disgw has (heartbeat at most 15 s,
// session at least 45 s) and is not made. With several nodes GROUP configs
// are not served yet (INVALID_REQUEST): the store is written by the
// group's owner, and an alter is forwarded to the controller.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/disgw/disgw/groupcoord"
	"github.com/disgw/disgw/groupcoord/consumer"
)

// groupConfigDef is a GROUP config: Kafka's description, the broker
// setting giving its default, and its bounds in milliseconds.
type groupConfigDef struct {
	kafkaConfigDef
	atLeast  int32 // Kafka's ConfigDef bound
	min, max int32 // the broker's group.consumer.min/max.* (Kafka's defaults)
	brokerMs func(consumer.Config) int32
}

func durMs(d time.Duration) int32 { return int32(d / time.Millisecond) }

// groupConfigDefs are the GROUP configs disgw serves, in name order, as
// Kafka 4.4 describes them.
var groupConfigDefs = []groupConfigDef{
	{kafkaConfigDef: kafkaConfigDef{name: groupcoord.ConsumerAssignmentIntervalConfig, typ: kmsg.ConfigTypeInt,
		synonym: "group.consumer.assignment.interval.ms",
		doc:     "The interval between assignment updates for a consumer group."},
		atLeast: 0, min: 0, max: 15000, brokerMs: func(consumer.Config) int32 { return 1000 }},
	{kafkaConfigDef: kafkaConfigDef{name: groupcoord.ConsumerHeartbeatIntervalConfig, typ: kmsg.ConfigTypeInt,
		synonym: "group.consumer.heartbeat.interval.ms",
		doc:     "The heartbeat interval given to the members of a consumer group."},
		atLeast: 1, min: 5000, max: 15000, brokerMs: func(c consumer.Config) int32 { return durMs(c.HeartbeatInterval) }},
	{kafkaConfigDef: kafkaConfigDef{name: groupcoord.ConsumerSessionTimeoutConfig, typ: kmsg.ConfigTypeInt,
		synonym: "group.consumer.session.timeout.ms",
		doc:     "The timeout to detect client failures when using the consumer group protocol."},
		atLeast: 1, min: 45000, max: 60000, brokerMs: func(c consumer.Config) int32 { return durMs(c.SessionTimeout) }},
}

func findGroupConfig(name string) *groupConfigDef {
	for i := range groupConfigDefs {
		if groupConfigDefs[i].name == name {
			return &groupConfigDefs[i]
		}
	}
	return nil
}

// groupConfigErr is a refusal with Kafka's exact message (no prefix).
type groupConfigErr struct {
	ke  *kerr.Error
	msg string
}

func (e *groupConfigErr) Error() string { return e.msg }
func (e *groupConfigErr) Unwrap() error { return e.ke }

func groupErr(ke *kerr.Error, format string, args ...any) error {
	return &groupConfigErr{ke: ke, msg: fmt.Sprintf(format, args...)}
}

// describeGroupConfig lists group name's configs as Kafka 4.4 does: each
// at its override (source GROUP_CONFIG, synonyms the override then the
// broker default) or the broker's value (DEFAULT_CONFIG, with the broker
// key as synonym). Errors: INVALID_REQUEST for an empty name; the
// backend's.
func (s *Server) describeGroupConfig(ctx context.Context, name string) ([]configEntry, error) {
	if name == "" {
		return nil, groupErr(kerr.InvalidRequest, "Group name must not be empty")
	}
	if s.cluster != nil {
		return nil, groupErr(kerr.InvalidRequest, "group configs are not served with several gateway nodes yet")
	}
	over, err := s.groups.GroupConfig(ctx, name)
	if err != nil {
		return nil, err
	}
	broker := consumer.DefaultConfig()
	entries := make([]configEntry, 0, len(groupConfigDefs))
	for i := range groupConfigDefs {
		d := &groupConfigDefs[i]
		def := strconv.Itoa(int(d.brokerMs(broker)))
		dflt := configSynonym{name: d.synonym, value: ptr(def), source: kmsg.ConfigSourceDefaultConfig}
		e := configEntry{def: &d.kafkaConfigDef, value: ptr(def), source: kmsg.ConfigSourceDefaultConfig, synonyms: []configSynonym{dflt}}
		if v, ok := over[d.name]; ok {
			val := strconv.Itoa(int(v))
			e.value, e.source = ptr(val), kmsg.ConfigSourceGroupConfig
			e.synonyms = []configSynonym{{name: d.name, value: ptr(val), source: kmsg.ConfigSourceGroupConfig}, dflt}
		}
		entries = append(entries, e)
	}
	return entries, nil
}

// alterGroupConfig applies n operations (op) to group name's configs,
// validated as Kafka 4.4's GroupConfig.validate, and stores the result
// unless validateOnly: IncrementalAlterConfigs' operations on what the
// group has, or with replace AlterConfigs' (API 33) SETs on nothing (the
// keys it leaves out go back to their defaults). Errors: groupConfigErr
// (Kafka's codes and messages, see the file's comment); the backend's.
func (s *Server) alterGroupConfig(ctx context.Context, name string, replace, validateOnly bool,
	n int, op func(int) (string, kmsg.IncrementalAlterConfigOp, *string)) error {
	if name == "" {
		return groupErr(kerr.InvalidRequest, "Default group resources are not allowed.")
	}
	if s.cluster != nil {
		return groupErr(kerr.InvalidRequest, "group configs are not served with several gateway nodes yet")
	}
	seen := make(map[string]bool, n)
	for i := range n {
		key, _, _ := op(i)
		if seen[key] {
			return groupErr(kerr.InvalidRequest, "Error due to duplicate config keys")
		}
		seen[key] = true
	}
	s.groupConfigMu.Lock()
	defer s.groupConfigMu.Unlock()
	cur, err := s.groups.GroupConfig(ctx, name)
	if err != nil {
		return err
	}
	next := maps.Clone(cur)
	if next == nil || replace {
		next = groupcoord.GroupConfig{}
	}
	for i := range n {
		key, o, value := op(i)
		d := findGroupConfig(key)
		switch o {
		case kmsg.IncrementalAlterConfigOp(0): // SET
			if value == nil {
				return groupErr(kerr.InvalidRequest, "Null value not supported for : %s", key)
			}
			if d == nil {
				return unknownGroupConfig(key)
			}
			v, err := d.parse(*value)
			if err != nil {
				return err
			}
			next[key] = v
		case kmsg.IncrementalAlterConfigOp(1): // DELETE
			delete(next, key)
		case kmsg.IncrementalAlterConfigOp(2), kmsg.IncrementalAlterConfigOp(3): // APPEND, SUBTRACT
			if d == nil {
				return unknownGroupConfig(key)
			}
			return groupErr(kerr.InvalidConfig, "Can't %s to key %s because its type is not LIST.",
				map[bool]string{true: "APPEND", false: "SUBTRACT"}[o == 2], key)
		default:
			return groupErr(kerr.InvalidRequest, "unknown config operation %d for %s", o, key)
		}
	}
	if validateOnly || maps.Equal(cur, next) {
		return nil
	}
	if err := s.groups.SetGroupConfig(ctx, name, next); err != nil {
		if errors.Is(err, groupcoord.ErrNoConfigStore) {
			return groupErr(kerr.InvalidRequest, "%v", err)
		}
		return err
	}
	s.log.Info("group configs altered", zapGroup(name))
	return nil
}

// parse is Kafka's ConfigDef parsing of an INT (trimmed, at least
// atLeast) then GroupConfig's range check.
func (d *groupConfigDef) parse(value string) (int32, error) {
	value = strings.TrimSpace(value)
	v, err := strconv.ParseInt(value, 10, 32)
	if err != nil {
		return 0, groupErr(kerr.InvalidConfig, "Invalid value %s for configuration %s: Not a number of type INT", value, d.name)
	}
	if int32(v) < d.atLeast {
		return 0, groupErr(kerr.InvalidConfig, "Invalid value %s for configuration %s: Value must be at least %d", value, d.name, d.atLeast)
	}
	if int32(v) < d.min || int32(v) > d.max {
		return 0, groupErr(kerr.InvalidConfig, "%s must be in the range %d to %d inclusive.", d.name, d.min, d.max)
	}
	return int32(v), nil
}

// unknownGroupConfig refuses a key disgw does not serve: Kafka's message
// for a key Kafka does not know, or for the share and streams groups'
// keys, which Kafka has, that disgw serves no such groups.
func unknownGroupConfig(key string) error {
	for _, p := range []struct{ prefix, what string }{
		{"share.", "share groups (KIP-932)"},
		{"errors.deadletterqueue.", "share groups (KIP-932)"},
		{"streams.", "streams groups (KIP-1071)"},
	} {
		if strings.HasPrefix(key, p.prefix) {
			return groupErr(kerr.InvalidConfig, "Group config %s is not supported: disgw serves no %s", key, p.what)
		}
	}
	return groupErr(kerr.InvalidConfig, "Unknown group config name: %s", key)
}

// configuredGroups are the groups with configs, sorted, as
// ListConfigResources lists them. Errors: the backend's.
func (s *Server) configuredGroups(ctx context.Context) ([]string, error) {
	if s.cluster != nil {
		return nil, nil
	}
	groups, err := s.groups.ConfiguredGroups(ctx)
	slices.Sort(groups)
	return groups, err
}
