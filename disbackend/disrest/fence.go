package disrest

import (
	"context"
	"time"
)

// fence is what the write paths ask before they write to DIS on behalf of
// something this node owns (docs/cluster.md §4): in cluster mode the
// membership (cluster*.go) implements it from the current view and the
// lease; a single node uses soloFence, which allows everything.
//
// Keys are placement keys: disbackend.PartitionKey(stream, partition) for
// a partition's records, intents, log start and compaction; GroupKey for a
// group's state and committed offsets; "controller" for writes only the
// controller makes (topic admin, configs, ACLs, SCRAM). Fenced checkpoints
// are of the membership app "__disgw-nodes": DIS checks client_id and
// generation_id of a CommitCheckpoint only against the group of the app
// committed to (docs/cluster.md §1).
type fence interface {
	// mayWrite returns nil when this node may send a write for key now:
	// it owns key in its current view and its lease holds. Otherwise an
	// error wrapping disbackend.ErrNotLeader (a partition),
	// ErrNotCoordinator (a group) or ErrNotController (disbackend's
	// cluster sentinels). Writers call it
	// before every request they send, retries included.
	mayWrite(key string) error
	// takeover blocks until this node may make its first write for key
	// in the current view: at once for a key it owned in the previous
	// view too, else after the takeover wait (cluster_lease +
	// dis_request_timeout since the previous generation ended). The
	// caller then resolves the previous owner's intent before writing.
	// ctx's error, or mayWrite's, when it cannot.
	takeover(ctx context.Context, key string) error
	// takeoverWait returns how long takeover would wait for key now: 0
	// when it would return at once (the key owned in the previous view
	// too, the wait over, or the key not this node's: takeover's error).
	takeoverWait(key string) time.Duration
	// member returns the DIS client id and generation to send with a
	// fenced CommitCheckpoint of the membership app, and ok
	// false when there is no membership (a single node: commit as before).
	member() (clientID string, generation int64, ok bool)
}

// soloFence is a single node's fence: it owns everything, always.
type soloFence struct{}

func (soloFence) mayWrite(string) error                         { return nil }
func (soloFence) takeover(context.Context, string) error        { return nil }
func (soloFence) takeoverWait(string) time.Duration             { return 0 }
func (soloFence) member() (clientID string, gen int64, ok bool) { return "", 0, false }

var _ fence = soloFence{}
