package disbackend

import (
	"context"
	"time"

	"github.com/disgw/disgw/disbackend/disapi"
)

// MaxCheckpointMetadataLen is DIS's limit on checkpoint metadata: 1000
// characters. Longer commit metadata gets Kafka OFFSET_METADATA_TOO_LARGE.
const MaxCheckpointMetadataLen = disapi.MaxCheckpointMetadataLen

// App is a DIS app (consumer identity); the gateway maps each Kafka consumer
// group to one (AppNameForGroup).
type App struct {
	// Name is the DIS app name, [A-Za-z0-9_-]{1,200}.
	Name string
	// GroupID is the original Kafka group id, kept by the backend so that
	// groups can be listed back from what the backend stores.
	GroupID   string
	CreatedAt time.Time
}

// Checkpoint is a DIS LAST_READ checkpoint: the committed Kafka offset of
// one partition, stored unchanged as the next sequence number to read
// (what the DIS Kafka Adapter, Flink and Logstash store).
type Checkpoint struct {
	Stream    string // DIS stream name
	Partition int32
	// SequenceNumber is the Kafka committed offset (the next offset to
	// read), any value, as Kafka takes any: below the log start, past the
	// end, on an empty partition. DIS takes a checkpoint only inside the
	// partition's range, so the DIS backend keeps an offset outside it
	// beside the checkpoint, which it sets to the nearest sequence number
	// DIS takes (disrest kept.go, docs/dis-backend.md "Consumer groups and
	// committed offsets").
	SequenceNumber int64
	// Metadata is the Kafka commit metadata, at most
	// MaxCheckpointMetadataLen characters.
	Metadata string
	// LeaderEpoch is the committed leader epoch (OffsetCommit v6+
	// committed_leader_epoch, returned by OffsetFetch v5+), -1 when the
	// commit had none; any other value is kept as given, as Kafka keeps it. The embedded store keeps it in the checkpoint; DIS
	// checkpoints have no such field, so the DIS backend keeps it beside
	// the checkpoint, where DIS applications reading the checkpoint do not
	// see it (disrest: the app's epoch app), and answers -1 when the
	// checkpoint was moved since (by a DIS client).
	LeaderEpoch int32
	// CommittedAt is when the checkpoint was written.
	CommittedAt time.Time
}

// Apps keeps apps and their checkpoints. DIS: CreateApp, DeleteApp,
// DescribeApp, ListApps, CommitCheckpoint, GetCheckpoint, DeleteCheckpoint.
// Every write is durable (synced) before it returns.
type Apps interface {
	// CreateApp creates an app for a group. Errors: ErrAppExists (same
	// name; the caller treats it as success when GroupID matches),
	// ErrNameCollision (the name exists for another GroupID), ErrInvalidName.
	CreateApp(ctx context.Context, app App) (App, error)
	// DeleteApp removes an app and all its checkpoints. Errors: ErrAppNotFound.
	DeleteApp(ctx context.Context, name string) error
	// DescribeApp returns one app. Errors: ErrAppNotFound.
	DescribeApp(ctx context.Context, name string) (App, error)
	// ListApps returns every app, sorted by Name.
	ListApps(ctx context.Context) ([]App, error)
	// CommitCheckpoints writes LAST_READ checkpoints of an app atomically
	// and durably, each with any SequenceNumber (Kafka OffsetCommit takes
	// any offset). Errors: ErrAppNotFound, ErrStreamNotFound,
	// ErrPartitionNotFound, ErrInvalidConfig (metadata too long).
	CommitCheckpoints(ctx context.Context, app string, cps []Checkpoint) error
	// Checkpoints returns the app's checkpoints, sorted by stream and
	// partition; stream "" means every stream. Errors: ErrAppNotFound.
	Checkpoints(ctx context.Context, app, stream string) ([]Checkpoint, error)
	// DeleteCheckpoints removes the app's checkpoints of a stream's
	// partitions (all of the stream's when partitions is nil). Errors:
	// ErrAppNotFound.
	DeleteCheckpoints(ctx context.Context, app, stream string, partitions []int32) error
}
