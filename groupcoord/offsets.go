package groupcoord

import (
	"context"
	"errors"
	"sort"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/groupcoord/consumer"
)

// Committed offsets are DIS app checkpoints: the group id maps to an app
// (disbackend.AppNameForGroup), created on the group's first commit, and
// each committed offset is a LAST_READ checkpoint of that app for the
// topic's stream and partition, holding the offset unchanged (the next
// offset to read, as the DIS Kafka Adapter, Flink and Logstash commit) and
// the commit metadata; the committed leader epoch (OffsetCommit v6+) is kept
// with it (disbackend.Checkpoint.LeaderEpoch) and returned by OffsetFetch
// v5+, -1 when the commit had none. Any offset is taken, as Kafka takes it;
// the DIS backend keeps one outside the partition's range beside the
// checkpoint (docs/dis-backend.md, "Kept commits"). Reads go to the backend
// every time, so the answer is what DIS holds even if another DIS client
// shares the app.

var (
	// errNoApps: the backend keeps no apps, so offsets cannot be stored
	// (COORDINATOR_NOT_AVAILABLE).
	errNoApps = errors.New("backend keeps no apps (committed offsets)")
	// errGroupCollision: the group id's (hashed) app name belongs to another
	// group (INVALID_GROUP_ID).
	errGroupCollision = errors.New("group id maps to the DIS app of another group")
)

// commitPlan is the group goroutine's verdict on an OffsetCommit: an error
// for every partition, or which partitions to write (the others are
// unchanged).
type commitPlan struct {
	code  int16
	write []int // indexes into the candidates
	seq   uint64
	g     *group // the group in memory that planned it (applyCommit answers it)
}

type commitCandidate struct {
	topic   string // Kafka topic name
	cp      disbackend.Checkpoint
	topicID [16]byte
	resp    *kmsg.OffsetCommitResponseTopicPartition
}

// CommitOffsets stores an OffsetCommit's offsets as checkpoints and answers
// once they are synced. The topics must be named (the gateway resolves v10
// topic ids to names first). Generation -1 with no member id is accepted
// only when the group is Empty or unknown (standalone consumers, admin
// tools); a member's commit needs its member id and current generation.
// Unknown partitions get UNKNOWN_TOPIC_OR_PARTITION and metadata over
// disbackend.MaxCheckpointMetadataLen characters OFFSET_METADATA_TOO_LARGE,
// each on its own; an unchanged offset is not written again.
func (c *Coordinator) CommitOffsets(ctx context.Context, req *kmsg.OffsetCommitRequest) *kmsg.OffsetCommitResponse {
	return c.commitOffsets(ctx, req, true)
}

// CommitTxnOffsets stores the offsets a committed transaction's
// TxnOffsetCommit requests gave (Kafka writes them when the COMMIT marker
// reaches __consumer_offsets): as CommitOffsets, but without the member
// and generation check, made when they were sent (ValidateTxnCommit).
// req carries the group and the offsets; its generation and member id are
// ignored.
func (c *Coordinator) CommitTxnOffsets(ctx context.Context, req *kmsg.OffsetCommitRequest) *kmsg.OffsetCommitResponse {
	return c.commitOffsets(ctx, req, false)
}

// ValidateTxnCommit checks a TxnOffsetCommit's member against the group
// (Kafka ClassicGroup.validateTxnOffsetCommit, KIP-447): with a member id,
// a group instance id or a generation >= 0, the member must be the
// group's and the generation current; with none of them (TxnOffsetCommit
// v0-2) nothing is checked. Returns 0 or the Kafka error code:
// UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID, ILLEGAL_GENERATION,
// NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS.
func (c *Coordinator) ValidateTxnCommit(groupID string, generation int32, memberID string, instanceID *string) int16 {
	if generation < 0 && memberID == "" && instanceID == nil {
		return 0
	}
	if code := c.notReadyFor(groupID); code != 0 {
		return code
	}
	ch := make(chan int16, 1)
	_, err := c.send(groupID, true, func(g *group) {
		if g.cg != nil {
			_, err := g.cg.ValidateOffsetCommit(memberID, instanceID, generation, true, 3)
			ch <- consumerCode(err)
			return
		}
		if code := g.validateMember(memberID, instanceID); code != 0 {
			ch <- code
			return
		}
		if generation != g.generation {
			ch <- kerr.IllegalGeneration.Code
			return
		}
		ch <- 0
	}, func() { ch <- kerr.NotCoordinator.Code })
	if err != nil {
		return sendCode(err)
	}
	return <-ch // a group unknown until now is Empty: UNKNOWN_MEMBER_ID, as Kafka
}

func (c *Coordinator) commitOffsets(ctx context.Context, req *kmsg.OffsetCommitRequest, validate bool) *kmsg.OffsetCommitResponse {
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition = p.Partition
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	setAll := func(code int16) *kmsg.OffsetCommitResponse {
		for i := range resp.Topics {
			for j := range resp.Topics[i].Partitions {
				if resp.Topics[i].Partitions[j].ErrorCode == 0 {
					resp.Topics[i].Partitions[j].ErrorCode = code
				}
			}
		}
		return resp
	}
	if req.Group == "" {
		return setAll(kerr.InvalidGroupID.Code)
	}
	if code := c.notReadyFor(req.Group); code != 0 {
		return setAll(code)
	}
	if c.apps == nil {
		return setAll(kerr.CoordinatorNotAvailable.Code)
	}
	var cands []commitCandidate
	for i, t := range req.Topics {
		info, ok := c.topics.Topic(ctx, t.Topic)
		if ok {
			resp.Topics[i].TopicID = info.ID
		}
		for j, p := range t.Partitions {
			rp := &resp.Topics[i].Partitions[j]
			meta := ""
			if p.Metadata != nil {
				meta = *p.Metadata
			}
			switch {
			case !ok || p.Partition < 0 || p.Partition >= info.Partitions:
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case utf8.RuneCountInString(meta) > disbackend.MaxCheckpointMetadataLen:
				rp.ErrorCode = kerr.OffsetMetadataTooLarge.Code
			default:
				epoch := p.LeaderEpoch // kept as given, as Kafka keeps it (even below -1)
				if req.Version < 6 {
					epoch = -1
				}
				cands = append(cands, commitCandidate{
					topic: t.Topic,
					cp: disbackend.Checkpoint{Stream: info.Stream, Partition: p.Partition, SequenceNumber: p.Offset,
						Metadata: meta, LeaderEpoch: epoch},
					topicID: info.ID,
					resp:    rp,
				})
			}
		}
	}
	ch := make(chan commitPlan, 1)
	_, err := c.send(req.Group, true, func(g *group) { ch <- g.planCommit(req, cands, validate) },
		func() { ch <- commitPlan{code: kerr.NotCoordinator.Code} })
	if err != nil {
		return setAll(sendCode(err))
	}
	plan := <-ch // the group answers at once: no I/O in its goroutine
	if plan.code != 0 {
		return setAll(plan.code)
	}
	if len(plan.write) == 0 {
		return resp // unchanged offsets: nothing to write
	}
	cps := make([]disbackend.Checkpoint, len(plan.write))
	now := c.clock.Now()
	for i, k := range plan.write {
		cps[i] = cands[k].cp
		cps[i].CommittedAt = now
	}
	app, _ := disbackend.AppNameForGroup(req.Group)
	err = c.writeCheckpoints(ctx, req.Group, app, cps)
	c.applyCommit(cands, plan, err == nil)
	if err != nil {
		code := c.backendCode(err)
		c.log.Debug("offset commit failed", zap.String("group", req.Group), zap.Error(err))
		for _, k := range plan.write {
			cands[k].resp.ErrorCode = code
		}
	}
	return resp
}

// planCommit validates a commit against the group (Kafka
// ClassicGroup.validateOffsetCommit) and picks the partitions whose offset
// or metadata changed.
func (g *group) planCommit(req *kmsg.OffsetCommitRequest, cands []commitCandidate, validate bool) commitPlan {
	// v0 has no generation or member id: Kafka 3.x stored v0 commits in
	// ZooKeeper without looking at the group (KafkaApis
	// commitOffsetsToZookeeper), so they are not checked here either.
	if validate && req.Version > 0 && g.cg != nil {
		if code := g.validateConsumerCommit(req, cands, false); code != 0 {
			return commitPlan{code: code}
		}
	} else if validate && req.Version > 0 {
		if code := g.validateCommit(req.Generation, req.MemberID, req.InstanceID); code != 0 {
			return commitPlan{code: code}
		}
	}
	if m := g.members[req.MemberID]; m != nil && m.join == nil {
		g.armHeartbeat(m, m.session) // a commit shows the member is alive, as in Kafka
	}
	g.commitSeq++
	plan := commitPlan{seq: g.commitSeq, g: g}
	for i, cd := range cands {
		k := tp{cd.cp.Stream, cd.cp.Partition}
		if prev, ok := g.cache[k]; ok && g.latest[k] == prev.seq &&
			prev.offset == cd.cp.SequenceNumber && prev.metadata == cd.cp.Metadata && prev.leaderEpoch == cd.cp.LeaderEpoch &&
			prev.topicID == cd.topicID {
			continue
		}
		g.latest[k] = plan.seq
		plan.write = append(plan.write, i)
	}
	if len(plan.write) > 0 {
		g.inflight++
	}
	return plan
}

func (g *group) validateCommit(generation int32, memberID string, instanceID *string) int16 {
	if generation < 0 && g.state == Empty {
		return 0 // a group that only stores offsets (Kafka "simple" group)
	}
	if generation >= 0 || memberID != "" || instanceID != nil {
		if code := g.validateMember(memberID, instanceID); code != 0 {
			return code
		}
		if generation != g.generation {
			return kerr.IllegalGeneration.Code
		}
	} else if g.state != Empty {
		return kerr.UnknownMemberID.Code
	}
	if g.state == CompletingRebalance {
		// The member has its new generation but not its assignment yet.
		return kerr.RebalanceInProgress.Code
	}
	return 0
}

// applyCommit tells the group that planned the write how it ended, so it
// can skip the same offsets next time and leave memory when nothing is in
// flight. A group dropped meanwhile (it moved to another node) is not told.
func (c *Coordinator) applyCommit(cands []commitCandidate, plan commitPlan, ok bool) {
	plan.g.post(message{run: func(g *group) {
		g.inflight--
		for _, i := range plan.write {
			cp := cands[i].cp
			k := tp{cp.Stream, cp.Partition}
			if g.latest[k] != plan.seq {
				continue // a later commit of this partition is under way
			}
			if ok {
				g.cache[k] = committed{offset: cp.SequenceNumber, metadata: cp.Metadata, leaderEpoch: cp.LeaderEpoch,
					topicID: cands[i].topicID, seq: plan.seq}
			} else {
				delete(g.cache, k)
			}
		}
	}})
}

// writeCheckpoints commits cps to the group's app, creating the app on the
// first commit.
func (c *Coordinator) writeCheckpoints(ctx context.Context, groupID, app string, cps []disbackend.Checkpoint) error {
	if _, reversible := disbackend.GroupForAppName(app); !reversible {
		exists, err := c.ownApp(ctx, groupID, app)
		if err != nil {
			return err
		}
		if !exists {
			if err := c.createApp(ctx, groupID, app); err != nil {
				return err
			}
		}
	}
	err := c.apps.CommitCheckpoints(ctx, app, cps)
	if errors.Is(err, disbackend.ErrAppNotFound) {
		if err := c.createApp(ctx, groupID, app); err != nil {
			return err
		}
		err = c.apps.CommitCheckpoints(ctx, app, cps)
	}
	return err
}

func (c *Coordinator) createApp(ctx context.Context, groupID, app string) error {
	a, err := c.apps.CreateApp(ctx, disbackend.App{Name: app, GroupID: groupID, CreatedAt: c.clock.Now()})
	if errors.Is(err, disbackend.ErrAppExists) {
		if a.GroupID == "" || a.GroupID == groupID {
			return nil // created meanwhile (or by a DIS client under this name)
		}
		return errGroupCollision
	}
	if err == nil {
		c.log.Info("app created for group", zap.String("group", groupID), zap.String("app", app))
	}
	return err
}

// ownApp reports whether the app exists and belongs to groupID. Only hashed
// names (very long group ids) can belong to another group; for them the
// backend's App.GroupID decides.
func (c *Coordinator) ownApp(ctx context.Context, groupID, app string) (bool, error) {
	if _, reversible := disbackend.GroupForAppName(app); reversible {
		return true, nil
	}
	a, err := c.apps.DescribeApp(ctx, app)
	switch {
	case errors.Is(err, disbackend.ErrAppNotFound):
		return false, nil
	case err != nil:
		return false, err
	case a.GroupID != groupID:
		return false, errGroupCollision
	}
	return true, nil
}

// FetchOffsets answers one group of an OffsetFetch (the gateway turns v0-7
// requests into one group and resolves v10 topic ids). Topics nil means
// every partition the group has committed. A group that does not exist or a
// partition never committed reads as offset -1 with no error, as in Kafka
// (librdkafka depends on it).
func (c *Coordinator) FetchOffsets(ctx context.Context, rg kmsg.OffsetFetchRequestGroup) kmsg.OffsetFetchResponseGroup {
	sg := kmsg.NewOffsetFetchResponseGroup()
	sg.Group = rg.Group
	code := c.notReady()
	if code == 0 && rg.Group != "" && !c.owns(rg.Group) {
		// Offsets need no load (they are in the backend), so only the
		// owner is checked.
		code = kerr.NotCoordinator.Code
	}
	if code != 0 {
		sg.ErrorCode = code
		return sg
	}
	if rg.Group != "" && (rg.MemberID != nil || rg.MemberEpoch >= 0) {
		// OffsetFetch v9+ from a consumer group's member: its epoch is
		// checked (consumer.Group.ValidateOffsetFetch); a classic
		// group's fetch is not.
		if code := c.validateConsumerFetch(ctx, rg); code != 0 {
			sg.ErrorCode = code
			return sg
		}
	}
	var cps []disbackend.Checkpoint
	if rg.Group != "" {
		if c.apps == nil {
			sg.ErrorCode = kerr.CoordinatorNotAvailable.Code
			return sg
		}
		app, _ := disbackend.AppNameForGroup(rg.Group)
		own, err := c.ownApp(ctx, rg.Group, app)
		if errors.Is(err, errGroupCollision) {
			own, err = false, nil // not this group's: it has no offsets
		}
		if err == nil && own {
			stream := ""
			if len(rg.Topics) == 1 {
				if info, ok := c.topics.Topic(ctx, rg.Topics[0].Topic); ok {
					stream = info.Stream
				}
			}
			cps, err = c.apps.Checkpoints(ctx, app, stream)
			if errors.Is(err, disbackend.ErrAppNotFound) {
				cps, err = nil, nil
			}
		}
		if err != nil {
			sg.ErrorCode = c.backendCode(err)
			return sg
		}
	}
	byTP := make(map[tp]disbackend.Checkpoint, len(cps))
	for _, cp := range cps {
		byTP[tp{cp.Stream, cp.Partition}] = cp
	}
	part := func(stream string, p int32) kmsg.OffsetFetchResponseGroupTopicPartition {
		sp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
		sp.Partition = p
		sp.Offset = -1
		sp.LeaderEpoch = -1
		meta := ""
		if cp, ok := byTP[tp{stream, p}]; ok && stream != "" {
			sp.Offset = cp.SequenceNumber
			sp.LeaderEpoch = cp.LeaderEpoch
			meta = cp.Metadata
		}
		sp.Metadata = &meta
		return sp
	}
	if rg.Topics == nil {
		byStream := make(map[string][]int32)
		for _, cp := range cps {
			byStream[cp.Stream] = append(byStream[cp.Stream], cp.Partition)
		}
		for stream, ps := range byStream {
			info, ok := c.topics.Stream(ctx, stream)
			if !ok {
				continue // the topic is gone
			}
			st := kmsg.NewOffsetFetchResponseGroupTopic()
			st.Topic, st.TopicID = info.Topic, info.ID
			sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
			for _, p := range ps {
				st.Partitions = append(st.Partitions, part(stream, p))
			}
			sg.Topics = append(sg.Topics, st)
		}
		sort.Slice(sg.Topics, func(i, j int) bool { return sg.Topics[i].Topic < sg.Topics[j].Topic })
		return sg
	}
	for _, t := range rg.Topics {
		st := kmsg.NewOffsetFetchResponseGroupTopic()
		st.Topic, st.TopicID = t.Topic, t.TopicID
		stream := ""
		if info, ok := c.topics.Topic(ctx, t.Topic); ok {
			stream, st.TopicID = info.Stream, info.ID
		}
		for _, p := range t.Partitions {
			st.Partitions = append(st.Partitions, part(stream, p))
		}
		sg.Topics = append(sg.Topics, st)
	}
	return sg
}

// validateConsumerCommit applies a consumer group's member-epoch rules to
// an OffsetCommit (consumer.Group.ValidateOffsetCommit): its generation is
// the member epoch. Any refusal fails every partition, as in Kafka.
func (g *group) validateConsumerCommit(req *kmsg.OffsetCommitRequest, cands []commitCandidate, transactional bool) int16 {
	check, err := g.cg.ValidateOffsetCommit(req.MemberID, req.InstanceID, req.Generation, transactional, req.Version)
	if err != nil {
		return consumerCode(err)
	}
	for _, cd := range cands {
		if err := check(cd.topic, cd.cp.Partition); err != nil {
			return consumerCode(err)
		}
	}
	return 0
}

// consumerCode is the Kafka error code of a consumer group's refusal.
func consumerCode(err error) int16 {
	if err == nil {
		return 0
	}
	var ce *consumer.Error
	if errors.As(err, &ce) {
		return ce.Code.Code
	}
	return kerr.UnknownServerError.Code
}

// validateConsumerFetch checks an OffsetFetch's member epoch when its
// group is a consumer group in memory; 0 otherwise.
func (c *Coordinator) validateConsumerFetch(ctx context.Context, rg kmsg.OffsetFetchRequestGroup) int16 {
	ch := make(chan int16, 1)
	found, err := c.send(rg.Group, false, func(g *group) {
		if g.cg == nil {
			ch <- 0
			return
		}
		ch <- consumerCode(g.cg.ValidateOffsetFetch(rg.MemberID, rg.MemberEpoch))
	}, func() { ch <- kerr.NotCoordinator.Code })
	if err != nil {
		return sendCode(err)
	}
	if !found {
		return 0
	}
	select {
	case code := <-ch:
		return code
	case <-ctx.Done():
		return kerr.CoordinatorNotAvailable.Code
	}
}
