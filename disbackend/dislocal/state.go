package dislocal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"os"
	"path/filepath"
	"time"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/disbackend/disapi"
)

// state is what dislocal keeps beside the backend: the DIS attributes of
// each stream that disbackend.Stream does not hold. Guarded by Server.mu.
type state struct {
	Streams map[string]*streamState `json:"streams"`
	path    string
}

// streamState is one stream's DIS attributes.
type streamState struct {
	// StreamID is the stream_id this state belongs to (derived from the
	// backend's TopicID); a stream deleted and created again gets new state.
	StreamID          string `json:"stream_id"`
	StreamType        string `json:"stream_type"`
	DataType          string `json:"data_type"`
	DataSchema        string `json:"data_schema,omitempty"`
	CompressionFormat string `json:"compression_format,omitempty"`
	CSVDelimiter      string `json:"csv_delimiter,omitempty"`
	AutoScaleEnabled  bool   `json:"auto_scale_enabled"`
	AutoScaleMin      int64  `json:"auto_scale_min_partition_count,omitempty"`
	AutoScaleMax      int64  `json:"auto_scale_max_partition_count,omitempty"`
	// RetentionHours is data_duration; the backend's retention is
	// RetentionHours × Options.RetentionUnit.
	RetentionHours int32 `json:"retention_hours"`
	// Writable is the number of ACTIVE partitions (0 .. Writable-1); the
	// backend's partitions above it were left DELETED by a scale-down.
	Writable int32 `json:"writable"`
	// DeletedAt is when each partition >= Writable was scaled away (ms).
	DeletedAt    map[int32]int64 `json:"deleted_at,omitempty"`
	Scalings     []scaling       `json:"scalings,omitempty"`
	Tags         []tag           `json:"tags,omitempty"`
	SysTags      []tag           `json:"sys_tags,omitempty"`
	LastModified int64           `json:"last_modified"` // ms
}

// scaling is one UpdatePartitionCount, as update_partition_counts[] shows it.
type scaling struct {
	CreateTimestamp      int64 `json:"create_timestamp"`
	SrcPartitionCount    int32 `json:"src_partition_count"`
	TargetPartitionCount int32 `json:"target_partition_count"`
	ResultCode           int32 `json:"result_code"`
	AutoScale            bool  `json:"auto_scale"`
}

type tag struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

func loadState(path string) (*state, error) {
	st := &state{Streams: map[string]*streamState{}, path: path}
	if path == "" {
		return st, nil
	}
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return st, nil
	}
	if err != nil {
		return nil, fmt.Errorf("dislocal: read state: %w", err)
	}
	if err := json.Unmarshal(data, st); err != nil {
		return nil, fmt.Errorf("dislocal: state file %s: %w", path, err)
	}
	if st.Streams == nil {
		st.Streams = map[string]*streamState{}
	}
	return st, nil
}

// save writes the state file atomically (temp file created 0600, fsync,
// rename). Call with Server.mu held.
func (st *state) save() error {
	if st.path == "" {
		return nil
	}
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	tmp := st.path + ".tmp"
	// A fresh file, so that it is created 0600 (a stale one left by a
	// crash would keep its mode).
	if err := os.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, st.path); err != nil {
		return err
	}
	if d, err := os.Open(filepath.Dir(st.path)); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}

// saveState persists the state, as a DIS error on failure. Call with mu held.
func (s *Server) saveState() *disError {
	if err := s.state.save(); err != nil {
		return errf(500, disapi.CodeSystemError, "System error. [saving dislocal state: %v]", err)
	}
	return nil
}

var base62 = []byte("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")

// streamID derives DIS's 19-character alphanumeric stream_id from the
// backend's TopicID (stable across restarts).
func streamID(topicID [16]byte) string {
	n := new(big.Int).SetBytes(topicID[:14])
	out := make([]byte, 19)
	b62 := big.NewInt(62)
	m := new(big.Int)
	for i := 18; i >= 0; i-- {
		n.DivMod(n, b62, m)
		out[i] = base62[m.Int64()]
	}
	return string(out)
}

// streamOf returns the backend's stream and its DIS state, creating default
// state for a stream dislocal did not create (or created again). Call with
// mu held.
func (s *Server) streamOf(ctx context.Context, name string) (disbackend.Stream, *streamState, *disError) {
	bs, err := s.b.DescribeStream(ctx, name)
	if err != nil {
		return bs, nil, backendError(err, name, "", "")
	}
	return bs, s.stateFor(bs), nil
}

// stateFor returns bs's state, made fresh when missing or stale. Call with
// mu held.
func (s *Server) stateFor(bs disbackend.Stream) *streamState {
	id := streamID(bs.TopicID)
	ss := s.state.Streams[bs.Name]
	if ss == nil || ss.StreamID != id {
		hours := int32(disapi.MaxRetentionHours)
		if r := bs.Config.Retention; r > 0 {
			hours = int32((r + s.opts.RetentionUnit - 1) / s.opts.RetentionUnit)
		}
		ss = &streamState{
			StreamID: id, StreamType: "COMMON", DataType: "BLOB",
			RetentionHours: hours, Writable: bs.PartitionCount,
			LastModified: bs.CreatedAt.UnixMilli(),
		}
		s.state.Streams[bs.Name] = ss
	}
	if ss.Writable > bs.PartitionCount {
		ss.Writable = bs.PartitionCount
	}
	return ss
}

// streamByID finds a stream by stream_id, for the tag operations that
// carry it in their path: DIS.4603 when no stream has it. Call with mu
// held.
func (s *Server) streamByID(ctx context.Context, id string) (disbackend.Stream, *streamState, *disError) {
	bs, ss, found, derr := s.lookupStreamID(ctx, id)
	if derr != nil {
		return bs, ss, derr
	}
	if !found {
		return disbackend.Stream{}, nil, errf(400, disapi.CodeResourceNotFound, "Resource does not exist. [stream %s]", id)
	}
	return bs, ss, nil
}

// lookupStreamID finds the stream whose stream_id is id; found is false
// when there is none. It tries the stream the state file last knew by that
// id, then every stream. Call with mu held.
func (s *Server) lookupStreamID(ctx context.Context, id string) (bs disbackend.Stream, ss *streamState, found bool, derr *disError) {
	if id == "" {
		return disbackend.Stream{}, nil, false, nil
	}
	for name, known := range s.state.Streams {
		if known.StreamID != id {
			continue
		}
		if bs, err := s.b.DescribeStream(ctx, name); err == nil && streamID(bs.TopicID) == id {
			return bs, s.stateFor(bs), true, nil
		}
		break
	}
	all, err := s.b.ListStreams(ctx)
	if err != nil {
		return disbackend.Stream{}, nil, false, backendError(err, "", "", "")
	}
	for _, bs := range all {
		if streamID(bs.TopicID) == id {
			return bs, s.stateFor(bs), true, nil
		}
	}
	return disbackend.Stream{}, nil, false, nil
}

// streamByRef resolves the stream a request names by stream_name, by
// stream_id, or both (docs/dis-api.md §2.5): by name when a stream has
// that name, else by id, as DIS documents for PutRecords. Errors: DIS.4200
// when both are empty; DIS.4301 when neither names a stream (naming what
// was given); DIS.4116 when the request's AK is denied the stream found by
// id (Options.Deny; deniedRoute checks the names in paths and queries).
// Call with mu held.
func (s *Server) streamByRef(ctx context.Context, name, id string) (disbackend.Stream, *streamState, *disError) {
	if name == "" && id == "" {
		return disbackend.Stream{}, nil, errInvalid("stream_name or stream_id is required")
	}
	if name != "" {
		bs, ss, derr := s.streamOf(ctx, name)
		if derr == nil || derr.Code != disapi.CodeStreamNotFound || id == "" {
			return bs, ss, derr
		}
	}
	bs, ss, found, derr := s.lookupStreamID(ctx, id)
	if derr != nil {
		return bs, ss, derr
	}
	if !found {
		if name != "" {
			return disbackend.Stream{}, nil, errStreamNotFound(name + ", stream_id " + id)
		}
		return disbackend.Stream{}, nil, errStreamNotFound("stream_id " + id)
	}
	if derr := s.denied(ctx, bs.Name); derr != nil {
		return disbackend.Stream{}, nil, derr
	}
	return bs, ss, nil
}

// lockedStreamByRef is streamByRef under mu, for handlers that need only
// the backend's stream.
func (s *Server) lockedStreamByRef(ctx context.Context, name, id string) (disbackend.Stream, *disError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	bs, _, derr := s.streamByRef(ctx, name, id)
	return bs, derr
}

// Partition statuses.
const (
	statusActive  = "ACTIVE"
	statusDeleted = "DELETED"
	statusExpired = "EXPIRED"
)

// partitionStatus returns partition p's status: ACTIVE below Writable;
// DELETED after a scale-down until its data has expired (the stream's
// retention after the scale-down), then EXPIRED.
func (s *Server) partitionStatus(bs disbackend.Stream, ss *streamState, p int32) string {
	if p < ss.Writable {
		return statusActive
	}
	at, ok := ss.DeletedAt[p]
	if !ok {
		return statusDeleted
	}
	if r := bs.Config.Retention; r > 0 && s.now().UnixMilli()-at >= r.Milliseconds() {
		return statusExpired
	}
	return statusDeleted
}

// readablePartition resolves a partition id for reading: it must exist and
// not be EXPIRED. Call with mu held.
func (s *Server) readablePartition(bs disbackend.Stream, ss *streamState, id string) (int32, *disError) {
	p, ok := disbackend.ParsePartitionID(id)
	if !ok {
		return 0, errf(400, disapi.CodePartitionIDInvalid, "Invalid partition_id. [%s]", id)
	}
	if p >= bs.PartitionCount {
		return 0, errPartitionNotFound(id)
	}
	if s.partitionStatus(bs, ss, p) == statusExpired {
		return 0, errf(400, disapi.CodePartitionExpired, "Partition is expired. [%s]", disbackend.PartitionID(p))
	}
	return p, nil
}

func (s *Server) retention(hours int32) time.Duration {
	return time.Duration(hours) * s.opts.RetentionUnit
}
