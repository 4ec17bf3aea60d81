package disrest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/huaweicloud/huaweicloud-sdk-go-v3/services/dis/v2/model"
	"golang.org/x/sync/errgroup"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/disbackend/disapi"
)

// gatewayApp is the gateway-owned app whose checkpoint on MetaStream holds
// the producer-id allocator. No group maps to it: AppNameForGroup escapes
// every '_' as _XX and hashed names end in "__" and 16 hex digits.
const gatewayApp = "__disgw"

// compactApp is the gateway-owned app whose checkpoint on each partition
// of a compacted stream points at the partition's key-index snapshot
// (compactsnap.go).
const compactApp = "__disgw-compact"

// epochAppPrefix begins the name of a group app's side app (named for
// what it first held): the gateway-owned app whose checkpoints hold what
// the group app's checkpoints cannot, the Kafka committed leader epochs and
// the offsets outside the partition's range (kept.go; DIS checkpoints have
// no epoch field, and their metadata is the Kafka commit metadata, which
// DIS applications sharing the app read). No group app begins with "__"
// (AppNameForGroup escapes '_').
const epochAppPrefix = "__disgw-epoch-"

// epochApp is the name of app's side app (kept.go): epochAppPrefix and the app's
// name, or, when that is longer than DIS allows, a prefix of it, '-' and
// 16 hex digits of the name's SHA-256.
func epochApp(app string) string {
	name := epochAppPrefix + app
	if len(name) <= disbackend.MaxAppNameLen {
		return name
	}
	sum := sha256.Sum256([]byte(app))
	return name[:disbackend.MaxAppNameLen-17] + "-" + hex.EncodeToString(sum[:8])
}

// ownApp reports whether name is one of the gateway's own apps, which are
// not consumer groups.
func ownApp(name string) bool {
	return name == gatewayApp || name == compactApp || name == logStartApp || name == idemApp || strings.HasPrefix(name, epochAppPrefix) ||
		strings.HasPrefix(name, aclAppPrefix) || strings.HasPrefix(name, scramAppPrefix) || name == nodesApp || strings.HasPrefix(name, pidAppPrefix)
}

// groupKeyOf is the fence key of app's consumer group in cluster mode
// (disbackend.GroupKey of its group id, appFromDIS), "" on a single node;
// resp is app's ShowApp. DIS GetCheckpoint when the app keeps its group id
// on MetaStream.
func (s *Store) groupKeyOf(ctx context.Context, app string, resp *model.ShowAppResponse) (string, error) {
	if !s.clustered() {
		return "", nil
	}
	a, err := s.appFromDIS(ctx, app, 0, resp.CommitCheckpointStreamNames)
	if err != nil {
		return "", err
	}
	return disbackend.GroupKey(a.GroupID), nil
}

// groupFence asks the fence for app's consumer group (groupKeyOf) before
// a write to the app, and returns the key for the writes that follow.
// Errors: the fence's (ErrNotCoordinator), DIS's.
func (s *Store) groupFence(ctx context.Context, app string) (string, error) {
	if !s.clustered() {
		return "", nil
	}
	resp, err := s.showApp(ctx, app)
	if err != nil {
		return "", err
	}
	key, err := s.groupKeyOf(ctx, app, resp)
	if err != nil {
		return "", err
	}
	if err := s.groupWrite(ctx, key); err != nil {
		return "", fmt.Errorf("disrest: app %s: %w", app, err)
	}
	return key, nil
}

// onceOK runs a setup step until it succeeds once (a failed one is tried
// again by the next caller), holding off concurrent callers meanwhile.
type onceOK struct {
	mu   sync.Mutex
	done bool
}

// isDone reports whether a do has succeeded.
func (o *onceOK) isDone() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.done
}

func (o *onceOK) do(f func() error) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.done {
		return nil
	}
	if err := f(); err != nil {
		return err
	}
	o.done = true
	return nil
}

// ensureMeta creates MetaStream once per process (it may already exist).
func (s *Store) ensureMeta(ctx context.Context) error {
	return s.metaOnce.do(func() error {
		err := s.createStream(ctx, MetaStream, 1, disapi.MinRetentionHours, nil)
		if err != nil && !errors.Is(err, disbackend.ErrStreamExists) {
			return err
		}
		return nil
	})
}

func validAppName(name string) bool {
	if name == "" || len(name) > disbackend.MaxAppNameLen {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// commit writes one LAST_READ checkpoint.
func (s *Store) commit(ctx context.Context, app, stream string, part int32, sn int64, meta string) error {
	_, err := callIdempotent(ctx, s, "commit checkpoint", func() (*model.CommitCheckpointResponse, error) {
		return s.c.CommitCheckpoint(&model.CommitCheckpointRequest{Body: &model.CommitCheckpointReq{
			AppName: app, CheckpointType: model.GetCommitCheckpointReqCheckpointTypeEnum().LAST_READ,
			StreamName: stream, PartitionId: disbackend.PartitionID(part),
			SequenceNumber: strconv.FormatInt(sn, 10), Metadata: &meta,
		}})
	})
	return err
}

// checkpointOf reads one checkpoint; sn -1 when there is none.
func (s *Store) checkpointOf(ctx context.Context, app, stream string, part int32) (int64, string, error) {
	resp, err := callIdempotent(ctx, s, "get checkpoint", func() (*model.ShowCheckpointResponse, error) {
		return s.c.ShowCheckpoint(&model.ShowCheckpointRequest{
			AppName: app, StreamName: stream, PartitionId: disbackend.PartitionID(part),
			CheckpointType: model.GetShowCheckpointRequestCheckpointTypeEnum().LAST_READ,
		})
	})
	if err != nil {
		return 0, "", err
	}
	sn := int64(-1)
	if resp.SequenceNumber != nil {
		if v, err := strconv.ParseInt(*resp.SequenceNumber, 10, 64); err == nil {
			sn = v
		}
	}
	meta := ""
	if resp.Metadata != nil {
		meta = *resp.Metadata
	}
	return sn, meta, nil
}

// needsGroupRecord reports whether app's group id cannot be read back from
// its name.
func needsGroupRecord(app disbackend.App) bool {
	g, ok := disbackend.GroupForAppName(app.Name)
	return !ok || g != app.GroupID
}

func (s *Store) CreateApp(ctx context.Context, app disbackend.App) (disbackend.App, error) {
	if !validAppName(app.Name) || ownApp(app.Name) {
		return disbackend.App{}, fmt.Errorf("disrest: create app: %w: %q must be 1-%d letters, digits, '_' or '-'",
			disbackend.ErrInvalidName, app.Name, disbackend.MaxAppNameLen)
	}
	if s.clustered() {
		if err := s.fenced(disbackend.GroupKey(app.GroupID)); err != nil {
			return disbackend.App{}, fmt.Errorf("disrest: create app %s: %w", app.Name, err)
		}
	}
	record := needsGroupRecord(app)
	if record && utf8.RuneCountInString(app.GroupID) > disbackend.MaxCheckpointMetadataLen {
		return disbackend.App{}, fmt.Errorf("disrest: create app: %w: group id of %d characters: DIS keeps at most %d for a group id that the app name cannot give back",
			disbackend.ErrInvalidName, utf8.RuneCountInString(app.GroupID), disbackend.MaxCheckpointMetadataLen)
	}
	if record {
		if err := s.ensureMeta(ctx); err != nil {
			return disbackend.App{}, err
		}
	}
	_, err := call(ctx, s, "create app "+app.Name, func() (*model.CreateAppResponse, error) {
		return s.c.CreateApp(&model.CreateAppRequest{Body: &model.CreateAppReq{AppName: app.Name}})
	})
	if errors.Is(err, disbackend.ErrAppExists) {
		if have, derr := s.DescribeApp(ctx, app.Name); derr == nil && have.GroupID != app.GroupID {
			return disbackend.App{}, fmt.Errorf("disrest: create app %q: %w: it belongs to group %q", app.Name, disbackend.ErrNameCollision, have.GroupID)
		}
		return disbackend.App{}, err
	}
	if err != nil {
		return disbackend.App{}, err
	}
	if record {
		// Not atomic with the creation: a crash in between leaves an app
		// whose group id reads as its name.
		if err := s.commit(ctx, app.Name, MetaStream, 0, 0, app.GroupID); err != nil {
			return disbackend.App{}, err
		}
	}
	return s.DescribeApp(ctx, app.Name)
}

// DeleteApp deletes the app, then its side app if it has one. In cluster
// mode only the coordinator of the app's group may (ErrNotCoordinator).
// DIS DeleteApp.
func (s *Store) DeleteApp(ctx context.Context, name string) error {
	if _, err := s.groupFence(ctx, name); err != nil {
		return err
	}
	if err := s.deleteApp(ctx, name); err != nil {
		return err
	}
	if err := s.deleteApp(ctx, epochApp(name)); err != nil && !errors.Is(err, disbackend.ErrAppNotFound) {
		return err
	}
	return nil
}

func (s *Store) deleteApp(ctx context.Context, name string) error {
	_, err := call(ctx, s, "delete app "+name, func() (*model.DeleteAppResponse, error) {
		return s.c.DeleteApp(&model.DeleteAppRequest{AppName: name})
	})
	return err
}

// appFromDIS resolves the group id: the record on MetaStream when the app
// has one, else the reversed name, else the name.
func (s *Store) appFromDIS(ctx context.Context, name string, created int64, streams *[]string) (disbackend.App, error) {
	app := disbackend.App{Name: name, GroupID: name, CreatedAt: time.UnixMilli(created)}
	if g, ok := disbackend.GroupForAppName(name); ok {
		app.GroupID = g
	}
	if streams != nil && contains(*streams, MetaStream) {
		sn, meta, err := s.checkpointOf(ctx, name, MetaStream, 0)
		if err != nil {
			return disbackend.App{}, err
		}
		if sn >= 0 {
			app.GroupID = meta
		}
	}
	return app, nil
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

func (s *Store) showApp(ctx context.Context, name string) (*model.ShowAppResponse, error) {
	return callIdempotent(ctx, s, "describe app "+name, func() (*model.ShowAppResponse, error) {
		return s.c.ShowApp(&model.ShowAppRequest{AppName: name})
	})
}

func (s *Store) DescribeApp(ctx context.Context, name string) (disbackend.App, error) {
	if ownApp(name) {
		return disbackend.App{}, fmt.Errorf("disrest: describe app %q: %w", name, disbackend.ErrAppNotFound)
	}
	resp, err := s.showApp(ctx, name)
	if err != nil {
		return disbackend.App{}, err
	}
	var created int64
	if resp.CreateTime != nil {
		created = *resp.CreateTime
	}
	return s.appFromDIS(ctx, name, created, resp.CommitCheckpointStreamNames)
}

func (s *Store) ListApps(ctx context.Context) ([]disbackend.App, error) {
	var out []disbackend.App
	var start *string
	for {
		limit := int32(disapi.MaxListAppsLimit)
		resp, err := callIdempotent(ctx, s, "list apps", func() (*model.ListAppResponse, error) {
			return s.c.ListApp(&model.ListAppRequest{Limit: &limit, StartAppName: start})
		})
		if err != nil {
			return nil, err
		}
		if resp.Apps == nil || len(*resp.Apps) == 0 {
			break
		}
		for _, a := range *resp.Apps {
			if a.AppName == nil {
				continue
			}
			start = a.AppName
			if ownApp(*a.AppName) {
				continue
			}
			var created int64
			if a.CreateTime != nil {
				created = *a.CreateTime
			}
			app, err := s.appFromDIS(ctx, *a.AppName, created, a.CommitCheckpointStreamNames)
			if errors.Is(err, disbackend.ErrAppNotFound) {
				continue
			}
			if err != nil {
				return nil, err
			}
			out = append(out, app)
		}
		if resp.HasMoreApp == nil || !*resp.HasMoreApp {
			break
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// CommitCheckpoints checks every checkpoint first (app, streams,
// partitions, metadata length), then writes each with one CommitCheckpoint
// (POST /v2/{project_id}/checkpoints), at most commitParallelism at once,
// and its side record when the app has a side app (kept.go). Any offset is
// taken, as Kafka takes it: one outside the partition's range (which DIS
// refuses, DIS.4224) is kept by keepCommit, and Checkpoints reads it back.
// DIS has no multi-checkpoint write, so a failure part-way may leave some
// written: the commit is not atomic across partitions (the gateway's
// OffsetCommit answers each partition's error; groupcoord skips offsets
// that did not change before calling this).
//
// In cluster mode only the coordinator of the app's group commits
// (docs/cluster.md §6): the fence is asked for its GroupKey before each
// CommitCheckpoint, and refuses with ErrNotCoordinator.
func (s *Store) CommitCheckpoints(ctx context.Context, app string, cps []disbackend.Checkpoint) error {
	resp, err := s.showApp(ctx, app)
	if err != nil {
		return err
	}
	key, err := s.groupKeyOf(ctx, app, resp)
	if err != nil {
		return err
	}
	if err := s.groupWrite(ctx, key); err != nil {
		return fmt.Errorf("disrest: commit to app %s: %w", app, err)
	}
	counts := map[string]int32{}
	for _, cp := range cps {
		if n := utf8.RuneCountInString(cp.Metadata); n > disbackend.MaxCheckpointMetadataLen {
			return fmt.Errorf("disrest: commit %s/%d: %w: metadata of %d characters, more than DIS's %d",
				cp.Stream, cp.Partition, disbackend.ErrInvalidConfig, n, disbackend.MaxCheckpointMetadataLen)
		}
		if cp.Stream == MetaStream {
			return fmt.Errorf("disrest: commit %s/%d: %w", cp.Stream, cp.Partition, disbackend.ErrStreamNotFound)
		}
		n, ok := counts[cp.Stream]
		if !ok {
			st, err := s.DescribeStream(ctx, cp.Stream)
			if err != nil {
				return err
			}
			n = st.PartitionCount
			counts[cp.Stream] = n
		}
		if cp.Partition < 0 || cp.Partition >= n {
			return fmt.Errorf("disrest: commit %s/%d: %w", cp.Stream, cp.Partition, disbackend.ErrPartitionNotFound)
		}
	}
	side, err := s.epochsToWrite(ctx, app, cps)
	if err != nil {
		return err
	}
	// One commitOne per partition (DIS has no batch commit), each one or
	// two CommitCheckpoint calls at once, at most commitParallelism calls
	// in all. Not atomic: after an error, some of the others may have been
	// written (a side record counts only while the checkpoint has its
	// sequence number, kept.go, so a half-written pair reads as the
	// checkpoint alone, never as another commit).
	limit := commitParallelism
	if side {
		limit = commitParallelism / 2
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(limit)
	for _, cp := range cps {
		g.Go(func() error { return s.commitOne(gctx, app, cp, side, key) })
	}
	return g.Wait()
}

// commitOne writes one Kafka commit: the app's checkpoint at the offset
// and, when side, its epoch record (kept.go) at the same time. An offset
// DIS refuses (DIS.4224: outside the partition's range) or cannot take (a
// negative one) is written by keepCommit instead, as is one whose epoch
// record DIS refused (the range moved between the two calls). DIS
// CommitCheckpoint. key is the group's fence key, asked before each
// CommitCheckpoint ("" on a single node).
func (s *Store) commitOne(ctx context.Context, app string, cp disbackend.Checkpoint, side bool, key string) error {
	if err := s.fenced(key); err != nil {
		return fmt.Errorf("disrest: commit %s/%d to app %s: %w", cp.Stream, cp.Partition, app, err)
	}
	if cp.SequenceNumber < 0 {
		return s.keepCommit(ctx, app, cp, side, key)
	}
	var sideErr error
	var wg sync.WaitGroup
	if side {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sideErr = s.writeKept(ctx, epochApp(app), cp.Stream, cp.Partition, keptFor(cp, cp.SequenceNumber))
		}()
	}
	err := s.commit(ctx, app, cp.Stream, cp.Partition, cp.SequenceNumber, cp.Metadata)
	wg.Wait()
	if outOfRange(err) || (err == nil && outOfRange(sideErr)) {
		return s.keepCommit(ctx, app, cp, side, key)
	}
	if err != nil {
		return err
	}
	return sideErr
}

// epochsToWrite reports whether cps' side records (kept.go) are to be
// written to the app's side app, creating it for the first commit with an
// epoch. A commit without any epoch is written there only when the side app
// exists (so that an earlier epoch or kept offset at the same sequence
// number does not read back); keepCommit creates it for an offset DIS
// cannot hold. DIS ShowApp, CreateApp.
func (s *Store) epochsToWrite(ctx context.Context, app string, cps []disbackend.Checkpoint) (bool, error) {
	hasEpoch := false
	for _, cp := range cps {
		if cp.LeaderEpoch != -1 {
			hasEpoch = true
			break
		}
	}
	if hasEpoch {
		return true, s.ensureApp(ctx, epochApp(app))
	}
	_, err := s.showApp(ctx, epochApp(app))
	switch {
	case errors.Is(err, disbackend.ErrAppNotFound):
		return false, nil
	case err != nil:
		return false, err
	}
	return true, nil
}

// commitParallelism bounds the CommitCheckpoint calls of one
// CommitCheckpoints in flight at once.
const commitParallelism = 8

// Checkpoints lists the app's checkpoints: the streams it committed on
// (DescribeApp), the partitions with one (ShowConsumerState), their metadata
// (GetCheckpoint). CommittedAt is now: DIS keeps no commit time.
// The leader epochs, and the offsets DIS could not hold, come from the
// app's side records (kept.go: readKept, keptCommit.over); a checkpoint
// without a current record reads as DIS holds it, leader epoch -1.
func (s *Store) Checkpoints(ctx context.Context, app, stream string) ([]disbackend.Checkpoint, error) {
	out, err := s.checkpoints(ctx, app, stream)
	if err != nil || len(out) == 0 {
		return out, err
	}
	kept, err := s.readKept(ctx, epochApp(app), stream)
	if err != nil {
		return nil, err
	}
	for i := range out {
		if k, ok := kept[partKey{out[i].Stream, out[i].Partition}]; ok {
			out[i] = k.over(out[i])
		}
	}
	return out, nil
}

// checkpoints lists one app's checkpoints (LeaderEpoch -1).
// eachCheckpointed calls fn with each partition of stream on which app has
// a LAST_READ checkpoint, and the checkpoint's sequence number as
// ShowConsumerState gives it, paging through DIS's answer
// (disapi.MaxConsumerStateLimit partitions a call). No checkpoint, or no
// such stream, is no call. DIS: GET /v2/{project_id}/apps/{app}/streams/{stream}.
func (s *Store) eachCheckpointed(ctx context.Context, app, stream string, fn func(part int32, sequenceNumber string) error) error {
	var start *string
	for {
		limit := int32(disapi.MaxConsumerStateLimit)
		cs, err := callIdempotent(ctx, s, "consumer state", func() (*model.ShowConsumerStateResponse, error) {
			return s.c.ShowConsumerState(&model.ShowConsumerStateRequest{AppName: app, StreamName: stream, Limit: &limit,
				StartPartitionId: start, CheckpointType: model.GetShowConsumerStateRequestCheckpointTypeEnum().LAST_READ})
		})
		if c := codeOf(err); c == disapi.CodeNoCheckpoint || c == disapi.CodeStreamNotFound {
			return nil
		}
		if err != nil {
			return err
		}
		if cs.PartitionConsumingStates == nil {
			return nil
		}
		for _, ps := range *cs.PartitionConsumingStates {
			if ps.PartitionId == nil {
				continue
			}
			start = ps.PartitionId
			if ps.SequenceNumber == nil || *ps.SequenceNumber == "-1" {
				continue
			}
			part, ok := disbackend.ParsePartitionID(*ps.PartitionId)
			if !ok {
				continue
			}
			if err := fn(part, *ps.SequenceNumber); err != nil {
				return err
			}
		}
		if cs.HasMore == nil || !*cs.HasMore {
			return nil
		}
	}
}

func (s *Store) checkpoints(ctx context.Context, app, stream string) ([]disbackend.Checkpoint, error) {
	resp, err := s.showApp(ctx, app)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	var out []disbackend.Checkpoint
	if resp.CommitCheckpointStreamNames == nil {
		return nil, nil
	}
	for _, name := range *resp.CommitCheckpointStreamNames {
		if name == MetaStream || (stream != "" && name != stream) {
			continue
		}
		err := s.eachCheckpointed(ctx, app, name, func(part int32, _ string) error {
			sn, meta, err := s.checkpointOf(ctx, app, name, part)
			if err != nil || sn < 0 {
				return err
			}
			out = append(out, disbackend.Checkpoint{Stream: name, Partition: part, SequenceNumber: sn, Metadata: meta,
				CommittedAt: now, LeaderEpoch: -1})
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Stream != out[j].Stream {
			return out[i].Stream < out[j].Stream
		}
		return out[i].Partition < out[j].Partition
	})
	return out, nil
}

// DeleteCheckpoints deletes the checkpoints, then their leader epochs in
// the app's side app (kept.go) if it has one. In cluster mode only the
// coordinator of the app's group may (ErrNotCoordinator). DIS
// DeleteCheckpoint.
func (s *Store) DeleteCheckpoints(ctx context.Context, app, stream string, partitions []int32) error {
	if _, err := s.groupFence(ctx, app); err != nil {
		return err
	}
	if err := s.deleteCheckpoints(ctx, app, stream, partitions); err != nil {
		return err
	}
	err := s.deleteCheckpoints(ctx, epochApp(app), stream, partitions)
	if err != nil && !errors.Is(err, disbackend.ErrAppNotFound) {
		return err
	}
	return nil
}

func (s *Store) deleteCheckpoints(ctx context.Context, app, stream string, partitions []int32) error {
	if _, err := s.showApp(ctx, app); err != nil {
		return err
	}
	del := func(pid *string) error {
		_, err := call(ctx, s, "delete checkpoint", func() (*model.DeleteCheckpointResponse, error) {
			return s.c.DeleteCheckpoint(&model.DeleteCheckpointRequest{AppName: app, StreamName: stream, PartitionId: pid,
				CheckpointType: model.GetDeleteCheckpointRequestCheckpointTypeEnum().LAST_READ})
		})
		if errors.Is(err, disbackend.ErrStreamNotFound) || errors.Is(err, disbackend.ErrPartitionNotFound) {
			return nil
		}
		return err
	}
	if partitions == nil {
		return del(nil)
	}
	for _, p := range partitions {
		id := disbackend.PartitionID(p)
		if err := del(&id); err != nil {
			return err
		}
	}
	return nil
}

// pidAllocator hands out producer ids from blocks reserved in the metadata
// of gatewayApp's checkpoint on MetaStream ("next=<id>"). Several gateway
// nodes reserving at the same instant can get the same block: DIS has no
// conditional write. Documented in docs/dis-backend.md ("Batches larger
// than one PutRecords"). In cluster mode each node reserves its blocks in
// a checkpoint of its own (pidApp) and hands out NodeID<<pidBits | n
// (docs/cluster.md §5), so no two nodes read and write the same
// checkpoint, nor hand out the same id.
type pidAllocator struct {
	mu         sync.Mutex
	next, stop int64
}

const pidBlock = 1000

// pidAppPrefix begins the name of a node's producer-id app (cluster mode):
// "__disgw-pid-<node id>", whose checkpoint on MetaStream holds the node's
// reservation ("next=<n>").
const pidAppPrefix = "__disgw-pid-"

// pidBits are the low bits of a cluster-mode producer id, below the node
// id; maxNodeID is the highest node id.
const (
	pidBits   = 40
	maxNodeID = 1023
)

// InitProducerID returns a new producer id, epoch 0: on a single node the
// next of gatewayApp's blocks; in cluster mode NodeID<<40 | n, n the next
// of the node's own blocks (pidApp), which start, for a node that never
// reserved one, where the single node's stopped (so node 0 does not hand
// out ids a single node did before cluster mode). Kafka InitProducerId
// (API 22). DIS CreateStream and CreateApp (once), GetCheckpoint,
// CommitCheckpoint (every pidBlock ids). Errors: DIS's; ErrInvalidConfig
// for a node id outside 0-1023 or a node's 2^40 ids used up.
func (s *Store) InitProducerID(ctx context.Context) (int64, int16, error) {
	a := &s.pids
	a.mu.Lock()
	defer a.mu.Unlock()
	clustered := s.clustered()
	if clustered && (s.opts.NodeID < 0 || s.opts.NodeID > maxNodeID) {
		return 0, 0, fmt.Errorf("disrest: producer id: %w: node id %d is not 0-%d", disbackend.ErrInvalidConfig, s.opts.NodeID, maxNodeID)
	}
	if a.next >= a.stop {
		app := gatewayApp
		if clustered {
			app = pidAppPrefix + strconv.Itoa(int(s.opts.NodeID))
		}
		if err := s.ensureMeta(ctx); err != nil {
			return 0, 0, err
		}
		if err := s.ensureApp(ctx, app); err != nil {
			return 0, 0, err
		}
		from, found, err := s.pidNext(ctx, app)
		if err != nil {
			return 0, 0, err
		}
		if clustered && !found {
			// The node's first block: past the single node's ids.
			if from, _, err = s.pidNext(ctx, gatewayApp); err != nil {
				return 0, 0, err
			}
		}
		if clustered && from+pidBlock > 1<<pidBits {
			return 0, 0, fmt.Errorf("disrest: producer id: %w: node %d handed out its 2^%d ids", disbackend.ErrInvalidConfig, s.opts.NodeID, pidBits)
		}
		if err := s.commit(ctx, app, MetaStream, 0, 0, "next="+strconv.FormatInt(from+pidBlock, 10)); err != nil {
			return 0, 0, err
		}
		a.next, a.stop = from, from+pidBlock
	}
	id := a.next
	a.next++
	if clustered {
		id |= int64(s.opts.NodeID) << pidBits
	}
	return id, 0, nil
}

// pidNext reads the next id of app's reservation on MetaStream, and
// whether there is one (0, false: none, or no such app).
func (s *Store) pidNext(ctx context.Context, app string) (int64, bool, error) {
	sn, meta, err := s.checkpointOf(ctx, app, MetaStream, 0)
	if errors.Is(err, disbackend.ErrAppNotFound) || codeOf(err) == disapi.CodeNoCheckpoint {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	v, ok := strings.CutPrefix(meta, "next=")
	if !ok || sn < 0 {
		return 0, false, nil
	}
	from, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("disrest: producer id allocator: unreadable %q", meta)
	}
	return from, true, nil
}
