package dislocal

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strconv"
	"time"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/disbackend/disapi"
)

const checkpointLastRead = "LAST_READ"

type appJSON struct {
	AppName                     string   `json:"app_name"`
	AppID                       string   `json:"app_id"`
	CreateTime                  int64    `json:"create_time"`
	CommitCheckpointStreamNames []string `json:"commit_checkpoint_stream_names"`
}

// appID derives a stable app_id from the app's name and creation time.
func appID(a disbackend.App) string {
	sum := sha256.Sum256([]byte(a.Name + "\x00" + a.CreatedAt.Format(time.RFC3339Nano)))
	return hex.EncodeToString(sum[:16])
}

func (s *Server) appJSON(r *http.Request, a disbackend.App) (appJSON, *disError) {
	cps, err := s.b.Checkpoints(r.Context(), a.Name, "")
	if err != nil {
		return appJSON{}, backendError(err, "", "", a.Name)
	}
	streams := []string{}
	for _, cp := range cps {
		if len(streams) == 0 || streams[len(streams)-1] != cp.Stream {
			streams = append(streams, cp.Stream)
		}
	}
	return appJSON{AppName: a.Name, AppID: appID(a), CreateTime: a.CreatedAt.UnixMilli(), CommitCheckpointStreamNames: streams}, nil
}

func (s *Server) createApp(r *http.Request, _ map[string]string, body []byte) (int, any, *disError) {
	var req struct {
		AppName string `json:"app_name"`
	}
	if derr := decodeBody(body, &req); derr != nil {
		return 0, nil, derr
	}
	if !validName(req.AppName, disbackend.MaxAppNameLen) {
		return 0, nil, errInvalid("app_name %q must be 1-%d letters, digits, '_' or '-'", req.AppName, disbackend.MaxAppNameLen)
	}
	if _, err := s.b.CreateApp(r.Context(), disbackend.App{Name: req.AppName, GroupID: req.AppName}); err != nil {
		return 0, nil, backendError(err, "", "", req.AppName)
	}
	return http.StatusCreated, nil, nil
}

func (s *Server) deleteApp(r *http.Request, vars map[string]string, _ []byte) (int, any, *disError) {
	name := vars["app_name"]
	if err := s.b.DeleteApp(r.Context(), name); err != nil {
		return 0, nil, backendError(err, "", "", name)
	}
	return http.StatusNoContent, nil, nil
}

func (s *Server) describeApp(r *http.Request, vars map[string]string, _ []byte) (int, any, *disError) {
	name := vars["app_name"]
	a, err := s.b.DescribeApp(r.Context(), name)
	if err != nil {
		return 0, nil, backendError(err, "", "", name)
	}
	aj, derr := s.appJSON(r, a)
	if derr != nil {
		return 0, nil, derr
	}
	return http.StatusOK, aj, nil
}

func (s *Server) listApps(r *http.Request, _ map[string]string, _ []byte) (int, any, *disError) {
	q := r.URL.Query()
	limit, derr := intParam(q.Get("limit"), "limit", disapi.DefaultListAppsLimit, 1, disapi.MaxListAppsLimit)
	if derr != nil {
		return 0, nil, derr
	}
	start, stream := q.Get("start_app_name"), q.Get("stream_name")
	all, err := s.b.ListApps(r.Context())
	if err != nil {
		return 0, nil, backendError(err, "", "", "")
	}
	apps := []appJSON{}
	total, more := 0, false
	for _, a := range all { // sorted by name
		aj, derr := s.appJSON(r, a)
		if derr != nil {
			if derr.Code == disapi.CodeAppNotFound {
				continue // deleted meanwhile
			}
			return 0, nil, derr
		}
		if stream != "" && !contains(aj.CommitCheckpointStreamNames, stream) {
			continue
		}
		total++
		if start != "" && a.Name <= start {
			continue
		}
		if len(apps) == limit {
			more = true
			continue
		}
		apps = append(apps, aj)
	}
	return http.StatusOK, map[string]any{"has_more_app": more, "apps": apps, "total_number": total}, nil
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

type consumingState struct {
	PartitionID    string `json:"partition_id"`
	SequenceNumber string `json:"sequence_number"`
	LatestOffset   int64  `json:"latest_offset"`
	EarliestOffset int64  `json:"earliest_offset"`
	CheckpointType string `json:"checkpoint_type"`
	Status         string `json:"status"`
}

// consumerState is ShowConsumerState: per partition, the app's checkpoint
// ("-1" where none) beside the partition's range. The stream is the path's
// {stream_name}, or the query's stream_id when no stream has that name
// (the Python SDK puts the id in both). DIS.4375 when the app never
// committed on the stream.
func (s *Server) consumerState(r *http.Request, vars map[string]string, _ []byte) (int, any, *disError) {
	app, name := vars["app_name"], vars["stream_name"]
	q := r.URL.Query()
	limit, derr := intParam(q.Get("limit"), "limit", disapi.DefaultConsumerStateLimit, 1, disapi.MaxConsumerStateLimit)
	if derr != nil {
		return 0, nil, derr
	}
	if t := q.Get("checkpoint_type"); t != "" && t != checkpointLastRead {
		return 0, nil, errInvalid("checkpoint_type %q must be LAST_READ", t)
	}
	from := int32(0)
	if v := q.Get("start_partition_id"); v != "" {
		p, ok := disbackend.ParsePartitionID(v)
		if !ok {
			return 0, nil, errf(400, disapi.CodePartitionIDInvalid, "Invalid partition_id. [start_partition_id %s]", v)
		}
		from = p + 1
	}
	ctx := r.Context()
	s.mu.Lock()
	bs, ss, derr := s.streamByRef(ctx, name, q.Get("stream_id"))
	if derr != nil {
		s.mu.Unlock()
		return 0, nil, derr
	}
	name = bs.Name
	statuses := make([]string, bs.PartitionCount)
	for p := range statuses {
		statuses[p] = s.partitionStatus(bs, ss, int32(p))
	}
	s.mu.Unlock()
	cps, err := s.b.Checkpoints(ctx, app, name)
	if err != nil {
		return 0, nil, backendError(err, name, "", app)
	}
	if len(cps) == 0 {
		return 0, nil, errf(400, disapi.CodeNoCheckpoint, "App has not committed a checkpoint on this stream. [%s, %s]", app, name)
	}
	byPart := map[int32]int64{}
	for _, cp := range cps {
		byPart[cp.Partition] = cp.SequenceNumber
	}
	out := []consumingState{}
	more := false
	for p := from; p < bs.PartitionCount; p++ {
		if statuses[p] == statusExpired {
			continue
		}
		if len(out) == limit {
			more = true
			break
		}
		rng, err := s.b.Range(name, p)
		if err != nil {
			return 0, nil, backendError(err, name, disbackend.PartitionID(p), app)
		}
		sn := "-1"
		if v, ok := byPart[p]; ok {
			sn = strconv.FormatInt(v, 10)
		}
		out = append(out, consumingState{
			PartitionID: disbackend.PartitionID(p), SequenceNumber: sn, LatestOffset: rng.Next,
			EarliestOffset: rng.First, CheckpointType: checkpointLastRead, Status: statuses[p],
		})
	}
	return http.StatusOK, map[string]any{"has_more": more, "stream_name": name, "app_name": app, "partition_consuming_states": out}, nil
}

type commitCheckpointRequest struct {
	AppName        string `json:"app_name"`
	CheckpointType string `json:"checkpoint_type"`
	StreamName     string `json:"stream_name"`
	// StreamID names the stream when StreamName is empty or names none
	// (the Java SDK 1.3.19+ and the adapter's ID subscriptions).
	StreamID       string  `json:"stream_id"`
	PartitionID    string  `json:"partition_id"`
	SequenceNumber string  `json:"sequence_number"`
	Metadata       *string `json:"metadata"`
	// ClientID and GenerationID are sent by the DIS Kafka Adapter's
	// consumer-group members (subscribe mode): the commit is refused when
	// the member is not in the group's current generation.
	ClientID     string `json:"client_id"`
	GenerationID *int64 `json:"generation_id"`
}

func (s *Server) commitCheckpoint(r *http.Request, _ map[string]string, body []byte) (int, any, *disError) {
	var req commitCheckpointRequest
	if derr := decodeBody(body, &req); derr != nil {
		return 0, nil, derr
	}
	switch {
	case req.AppName == "":
		return 0, nil, errInvalid("app_name is required")
	case req.CheckpointType != checkpointLastRead:
		return 0, nil, errInvalid("checkpoint_type %q must be LAST_READ", req.CheckpointType)
	case req.StreamName == "" && req.StreamID == "":
		return 0, nil, errInvalid("stream_name or stream_id is required")
	case req.PartitionID == "":
		return 0, nil, errf(400, disapi.CodePartitionIDInvalid, "Invalid partition_id. [partition_id is required]")
	}
	meta := ""
	if req.Metadata != nil {
		meta = *req.Metadata
	}
	if len([]rune(meta)) > disbackend.MaxCheckpointMetadataLen {
		return 0, nil, errInvalid("metadata is longer than %d characters", disbackend.MaxCheckpointMetadataLen)
	}
	sn, err := strconv.ParseInt(req.SequenceNumber, 10, 64)
	if err != nil || sn < 0 {
		return 0, nil, errf(400, disapi.CodeSequenceNumberInvalid, "Invalid sequence_number. [%q]", req.SequenceNumber)
	}
	ctx := r.Context()
	s.mu.Lock()
	bs, ss, derr := s.streamByRef(ctx, req.StreamName, req.StreamID)
	var p int32
	if derr == nil {
		p, derr = s.readablePartition(bs, ss, req.PartitionID)
	}
	s.mu.Unlock()
	if derr != nil {
		return 0, nil, derr
	}
	name := bs.Name
	if _, err := s.b.DescribeApp(ctx, req.AppName); err != nil {
		return 0, nil, backendError(err, name, req.PartitionID, req.AppName)
	}
	if req.ClientID != "" && req.GenerationID != nil && !s.opts.NoGroupFencing {
		if derr := s.checkGroupCommit(ctx, req.AppName, req.ClientID, *req.GenerationID); derr != nil {
			return 0, nil, derr
		}
	}
	rng, err := s.b.Range(name, p)
	if err != nil {
		return 0, nil, backendError(err, name, req.PartitionID, req.AppName)
	}
	if sn < rng.First || sn > rng.Next {
		return 0, nil, errf(400, disapi.CodeSequenceNumberOutOfRange, "Sequence_number out of range. [%d is outside [%d : %d] of %s]",
			sn, rng.First, rng.Next, disbackend.PartitionID(p))
	}
	err = s.b.CommitCheckpoints(ctx, req.AppName, []disbackend.Checkpoint{{
		Stream: name, Partition: p, SequenceNumber: sn, Metadata: meta, CommittedAt: s.now(),
		LeaderEpoch: -1, // DIS checkpoints have none
	}})
	if err != nil {
		return 0, nil, backendError(err, name, req.PartitionID, req.AppName)
	}
	return http.StatusCreated, nil, nil
}

// getCheckpoint answers the app's LAST_READ checkpoint of a partition,
// sequence_number "-1" when there is none (what DIS clients expect). The
// stream is the query's stream_name, or its stream_id (streamByRef).
func (s *Server) getCheckpoint(r *http.Request, _ map[string]string, _ []byte) (int, any, *disError) {
	q := r.URL.Query()
	app, name, id, pid := q.Get("app_name"), q.Get("stream_name"), q.Get("stream_id"), q.Get("partition_id")
	if app == "" || (name == "" && id == "") {
		return 0, nil, errInvalid("app_name and stream_name (or stream_id) are required")
	}
	if t := q.Get("checkpoint_type"); t != checkpointLastRead {
		return 0, nil, errInvalid("checkpoint_type %q must be LAST_READ", t)
	}
	p, ok := disbackend.ParsePartitionID(pid)
	if !ok {
		return 0, nil, errf(400, disapi.CodePartitionIDInvalid, "Invalid partition_id. [%s]", pid)
	}
	ctx := r.Context()
	bs, derr := s.lockedStreamByRef(ctx, name, id)
	if derr != nil {
		return 0, nil, derr
	}
	name = bs.Name
	if p >= bs.PartitionCount {
		return 0, nil, errPartitionNotFound(pid)
	}
	cps, err := s.b.Checkpoints(ctx, app, name)
	if err != nil {
		return 0, nil, backendError(err, name, pid, app)
	}
	for _, cp := range cps {
		if cp.Partition == p {
			return http.StatusOK, map[string]string{"sequence_number": strconv.FormatInt(cp.SequenceNumber, 10), "metadata": cp.Metadata}, nil
		}
	}
	return http.StatusOK, map[string]string{"sequence_number": "-1", "metadata": ""}, nil
}

// deleteCheckpoint deletes the app's checkpoints of a stream (the query's
// stream_name, or its stream_id: streamByRef), or of one partition. 204.
func (s *Server) deleteCheckpoint(r *http.Request, _ map[string]string, _ []byte) (int, any, *disError) {
	q := r.URL.Query()
	app, name, id := q.Get("app_name"), q.Get("stream_name"), q.Get("stream_id")
	if app == "" || (name == "" && id == "") {
		return 0, nil, errInvalid("app_name and stream_name (or stream_id) are required")
	}
	if t := q.Get("checkpoint_type"); t != checkpointLastRead {
		return 0, nil, errInvalid("checkpoint_type %q must be LAST_READ", t)
	}
	ctx := r.Context()
	bs, derr := s.lockedStreamByRef(ctx, name, id)
	if derr != nil {
		return 0, nil, derr
	}
	name = bs.Name
	var parts []int32
	if pid := q.Get("partition_id"); pid != "" {
		p, ok := disbackend.ParsePartitionID(pid)
		if !ok {
			return 0, nil, errf(400, disapi.CodePartitionIDInvalid, "Invalid partition_id. [%s]", pid)
		}
		if p >= bs.PartitionCount {
			return 0, nil, errPartitionNotFound(pid)
		}
		parts = []int32{p}
	}
	if err := s.b.DeleteCheckpoints(ctx, app, name, parts); err != nil {
		return 0, nil, backendError(err, name, "", app)
	}
	return http.StatusNoContent, nil, nil
}
