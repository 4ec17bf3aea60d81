package groupcoord

// GROUP config resources (Kafka 4.4's GroupConfig, resource type 32;
// docs/consumer-protocol.md §7.2): a group's overrides of the broker's
// group.consumer.* settings, set by IncrementalAlterConfigs and read by
// DescribeConfigs (kafka-configs --entity-type groups), whether the group
// exists or not. A consumer group uses its overrides from its next
// heartbeat (consumerConfig), as Kafka reads them per heartbeat.
//
// They are kept where the groups' membership is, the backend's
// GroupStateStore (the embedded store's Pebble, DIS's stream
// __disgw_groups), under the key configKey(group), which starts with a NUL
// byte so that restoring the groups tells them apart; the value is JSON
// (savedGroupConfig). A group whose id is a configs key (a client's id
// starting with that prefix) still restores (takeConfigs takes configs
// JSON only), but altering the configs of the group it names replaces
// its saved state. The coordinator keeps every group's overrides in
// memory (configs), read at start with the groups' states.

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/groupcoord/consumer"
)

// The GROUP configs disgw serves: Kafka 4.4's consumer group ones
// (GroupConfig.CONSUMER_*_CONFIG).
const (
	// ConsumerSessionTimeoutConfig overrides group.consumer.session.timeout.ms.
	ConsumerSessionTimeoutConfig = "consumer.session.timeout.ms"
	// ConsumerHeartbeatIntervalConfig overrides
	// group.consumer.heartbeat.interval.ms.
	ConsumerHeartbeatIntervalConfig = "consumer.heartbeat.interval.ms"
	// ConsumerAssignmentIntervalConfig overrides
	// group.consumer.assignment.interval.ms; disgw computes a target
	// assignment at once (docs/consumer-protocol.md), so it is kept and
	// described but changes nothing.
	ConsumerAssignmentIntervalConfig = "consumer.assignment.interval.ms"
)

// GroupConfig is a group's overrides, by Kafka config name, in
// milliseconds; a name not in it takes the broker's value.
type GroupConfig map[string]int32

// errReservedGroupID: a group id that starts as configKey's keys do
// (disbackend.GroupConfigStateKey): its state would be saved under
// another group's configs' key (and their writes over its state), so no
// group request may reach it (send); it is answered INVALID_GROUP_ID.
var errReservedGroupID = errors.New("group id starts with the reserved prefix of the GROUP configs' keys")

// configKey is group's configs' key in the GroupStateStore.
func configKey(group string) string { return disbackend.GroupConfigStateKey(group) }

// configGroup returns the group whose configs key is, and whether key is
// a configs key.
func configGroup(key string) (string, bool) { return disbackend.GroupOfConfigStateKey(key) }

// savedGroupConfig is the JSON of a group's configs in the store.
type savedGroupConfig struct {
	Configs map[string]int32 `json:"group_configs"`
}

// ErrNoConfigStore: the backend keeps no group state, so no GROUP configs
// (Kafka INVALID_REQUEST, from the gateway).
var ErrNoConfigStore = errors.New("the backend keeps no group state: group configs cannot be stored")

// GroupConfig returns group's overrides as last stored (nil: none), read
// from the backend so that a save by another node is seen; nil without a
// GroupStateStore. Any node reads them: through GroupStates, which reads
// the store to its end without the takeover GroupStateReader's read of a
// group makes (docs/cluster.md §6), which only the group's coordinator
// passes. Errors: the backend's.
func (c *Coordinator) GroupConfig(ctx context.Context, group string) (GroupConfig, error) {
	if c.states == nil {
		return nil, nil
	}
	states, err := c.states.GroupStates(ctx)
	if err != nil {
		return nil, err
	}
	b := states[configKey(group)]
	if b == nil {
		return nil, nil
	}
	cfg, err := decodeGroupConfig(b)
	if err != nil {
		return nil, nil // not configs: a group's state (takeConfigs)
	}
	return cfg, nil
}

// SetGroupConfig stores group's overrides (empty: none), synced before it
// returns, and uses them from the group's next heartbeat. The caller
// validated them (the gateway, as Kafka's GroupConfig.validate). Errors:
// the backend's; ErrNoConfigStore.
func (c *Coordinator) SetGroupConfig(ctx context.Context, group string, cfg GroupConfig) error {
	if c.states == nil {
		return ErrNoConfigStore
	}
	var b []byte
	if len(cfg) > 0 {
		var err error
		if b, err = json.Marshal(savedGroupConfig{Configs: cfg}); err != nil {
			return err
		}
	}
	if err := c.states.SaveGroupState(ctx, configKey(group), b); err != nil {
		return err
	}
	c.cfgMu.Lock()
	defer c.cfgMu.Unlock()
	if len(cfg) == 0 {
		delete(c.configs, group)
	} else {
		c.configs[group] = cfg
	}
	return nil
}

// ConfiguredGroups returns the groups with stored overrides, as
// ListConfigResources lists them. Errors: the backend's.
func (c *Coordinator) ConfiguredGroups(ctx context.Context) ([]string, error) {
	if c.states == nil {
		return nil, nil
	}
	states, err := c.states.GroupStates(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for key, b := range states {
		if g, ok := configGroup(key); ok {
			if cfg, err := decodeGroupConfig(b); err == nil && cfg != nil {
				out = append(out, g)
			}
		}
	}
	return out, nil
}

func decodeGroupConfig(b []byte) (GroupConfig, error) {
	var s savedGroupConfig
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, err
	}
	return s.Configs, nil
}

// takeConfigs moves the configs entries out of states (every state read
// from the store: at start, and after a view change, when another node may
// have changed the configs of a group that moved here) into memory, in
// place of what it held, leaving the groups' states. An entry under a
// configs key whose value is no configs JSON (the state of a group whose
// id happens to start with the configs prefix) is left as a group's. (A
// SetGroupConfig landing between the read and this is seen at the next
// view change only.)
func (c *Coordinator) takeConfigs(states map[string][]byte) {
	c.cfgMu.Lock()
	defer c.cfgMu.Unlock()
	clear(c.configs)
	for key, b := range states {
		g, ok := configGroup(key)
		if !ok {
			continue
		}
		cfg, err := decodeGroupConfig(b)
		if err != nil || cfg == nil {
			continue
		}
		delete(states, key)
		c.configs[g] = cfg
	}
}

// consumerConfig is the consumer group settings of group: the broker's
// (Config.Consumer) with the group's overrides.
func (c *Coordinator) consumerConfig(group string) consumer.Config {
	cfg := c.cfg.Consumer
	c.cfgMu.RLock()
	over := c.configs[group]
	c.cfgMu.RUnlock()
	if v, ok := over[ConsumerSessionTimeoutConfig]; ok {
		cfg.SessionTimeout = time.Duration(v) * time.Millisecond
	}
	if v, ok := over[ConsumerHeartbeatIntervalConfig]; ok {
		cfg.HeartbeatInterval = time.Duration(v) * time.Millisecond
	}
	return cfg
}
