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
// session at least 45 s) and is not made.
//
// With several nodes (docs/cluster.md) a group's configs are written by its
// coordinator, whose writes to the group state store are the ones the
// fence lets through and whose consumer group uses them: an alter, which
// reaches the controller as every admin write does (forward.go), is
// applied there when it coordinates the group, else by a node call of
// IncrementalAlterConfigs to the coordinator (alterGroupConfigAt). Any
// node describes and lists them from the store.

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
		atLeast: 0, min: 0, max: 15000, brokerMs: func(consumer.Config) int32 { return 0 }}, // disgw assigns at once: as a broker set to 0
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
	if !s.ownsGroup(name) {
		return s.alterGroupConfigAt(ctx, name, replace, validateOnly, n, op)
	}
	return s.applyGroupConfig(ctx, name, replace, validateOnly, n, op)
}

// applyGroupConfig is alterGroupConfig at the group's coordinator.
func (s *Server) applyGroupConfig(ctx context.Context, name string, replace, validateOnly bool,
	n int, op func(int) (string, kmsg.IncrementalAlterConfigOp, *string)) error {
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

// alterGroupConfigAt has the group's coordinator, another node, apply
// alterGroupConfig's operations: a node call of IncrementalAlterConfigs
// (AlterConfigs' replace sent as its SETs and a DELETE of every other
// key). Errors: the coordinator's answer (its code and message);
// COORDINATOR_NOT_AVAILABLE when it cannot be reached.
func (s *Server) alterGroupConfigAt(ctx context.Context, name string, replace, validateOnly bool,
	n int, op func(int) (string, kmsg.IncrementalAlterConfigOp, *string)) error {
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	req.ValidateOnly = validateOnly
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, name
	given := make(map[string]bool, n)
	for i := range n {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Op, c.Value = op(i)
		res.Configs = append(res.Configs, c)
		given[c.Name] = true
	}
	if replace {
		for i := range groupConfigDefs {
			if !given[groupConfigDefs[i].name] {
				c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
				c.Name, c.Op = groupConfigDefs[i].name, 1 // DELETE
				res.Configs = append(res.Configs, c)
			}
		}
	}
	req.Resources = append(req.Resources, res)
	v := s.cluster.View()
	if !v.Ready {
		return groupErr(kerr.CoordinatorNotAvailable, "no view of the cluster: the group's coordinator is unknown")
	}
	resp, err := s.fwd.call(ctx, v.Coordinator(name), req)
	if err != nil {
		s.log.Info("altering group configs at the group's coordinator failed", zapGroup(name), zapErr(err))
		return groupErr(kerr.CoordinatorNotAvailable, "the group's coordinator could not be reached")
	}
	ir := resp.(*kmsg.IncrementalAlterConfigsResponse)
	if len(ir.Resources) != 1 {
		return groupErr(kerr.UnknownServerError, "the group's coordinator answered %d resources", len(ir.Resources))
	}
	if rr := ir.Resources[0]; rr.ErrorCode != 0 {
		ke, ok := kerr.ErrorForCode(rr.ErrorCode).(*kerr.Error)
		if !ok {
			ke = kerr.UnknownServerError
		}
		msg := ""
		if rr.ErrorMessage != nil {
			msg = *rr.ErrorMessage
		}
		return &groupConfigErr{ke: ke, msg: msg}
	}
	return nil
}

// groupConfigNodeCall serves a node call of IncrementalAlterConfigs (from
// alterGroupConfigAt): each GROUP resource applied here when this node
// coordinates the group, else NOT_COORDINATOR (never passed on again).
func (c *conn) groupConfigNodeCall(ctx context.Context, r *kmsg.IncrementalAlterConfigsRequest) *kmsg.IncrementalAlterConfigsResponse {
	resp := r.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	for _, rr := range r.Resources {
		res := kmsg.NewIncrementalAlterConfigsResponseResource()
		res.ResourceType, res.ResourceName = rr.ResourceType, rr.ResourceName
		var err error
		switch {
		case rr.ResourceType != kmsg.ConfigResourceTypeGroupConfig:
			err = groupErr(kerr.InvalidRequest, "node calls alter group configs only")
		case !c.s.ownsGroup(rr.ResourceName):
			err = groupErr(kerr.NotCoordinator, "this node does not coordinate the group")
		default:
			err = c.s.applyGroupConfig(ctx, rr.ResourceName, false, r.ValidateOnly, len(rr.Configs),
				func(i int) (string, kmsg.IncrementalAlterConfigOp, *string) {
					return rr.Configs[i].Name, rr.Configs[i].Op, rr.Configs[i].Value
				})
		}
		if err != nil {
			res.ErrorCode, res.ErrorMessage = kafkaError(c.log, err), errMessage(err)
		}
		resp.Resources = append(resp.Resources, res)
	}
	return resp
}

// configuredGroups are the groups with configs, sorted, as
// ListConfigResources lists them. Errors: the backend's.
func (s *Server) configuredGroups(ctx context.Context) ([]string, error) {
	groups, err := s.groups.ConfiguredGroups(ctx)
	slices.Sort(groups)
	return groups, err
}
