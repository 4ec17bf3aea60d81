package dislocal

import (
	"net/http"
	"sort"
	"strconv"
	"time"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/disbackend/disapi"
)

func validName(name string, maxLen int) bool {
	if name == "" || len(name) > maxLen {
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

type createStreamRequest struct {
	StreamName                 string   `json:"stream_name"`
	PartitionCount             int32    `json:"partition_count"`
	StreamType                 string   `json:"stream_type"`
	DataType                   string   `json:"data_type"`
	DataDuration               *int32   `json:"data_duration"`
	AutoScaleEnabled           bool     `json:"auto_scale_enabled"`
	AutoScaleMinPartitionCount int64    `json:"auto_scale_min_partition_count"`
	AutoScaleMaxPartitionCount int64    `json:"auto_scale_max_partition_count"`
	DataSchema                 string   `json:"data_schema"`
	CSVProperties              *csvProp `json:"csv_properties"`
	CompressionFormat          string   `json:"compression_format"`
	Tags                       []tag    `json:"tags"`
	SysTags                    []tag    `json:"sys_tags"`
}

type csvProp struct {
	Delimiter string `json:"delimiter"`
}

func checkRetention(h int32) *disError {
	if h < disapi.MinRetentionHours || h > disapi.MaxRetentionHours {
		return errInvalid("data_duration %d must be %d-%d hours", h, disapi.MinRetentionHours, disapi.MaxRetentionHours)
	}
	return nil
}

func checkDataType(t string) *disError {
	switch t {
	case "", "BLOB", "JSON", "CSV":
		return nil
	}
	return errInvalid("data_type %q must be BLOB, JSON or CSV", t)
}

func (s *Server) createStream(r *http.Request, _ map[string]string, body []byte) (int, any, *disError) {
	var req createStreamRequest
	if derr := decodeBody(body, &req); derr != nil {
		return 0, nil, derr
	}
	if !validName(req.StreamName, disbackend.MaxStreamNameLen) {
		return 0, nil, errInvalid("stream_name %q must be 1-%d letters, digits, '_' or '-'", req.StreamName, disbackend.MaxStreamNameLen)
	}
	if req.PartitionCount <= 0 {
		return 0, nil, errInvalid("partition_count %d must be > 0", req.PartitionCount)
	}
	switch req.StreamType {
	case "":
		req.StreamType = "COMMON"
	case "COMMON", "ADVANCED":
	default:
		return 0, nil, errInvalid("stream_type %q must be COMMON or ADVANCED", req.StreamType)
	}
	if derr := checkDataType(req.DataType); derr != nil {
		return 0, nil, derr
	}
	if req.DataType == "" {
		req.DataType = "BLOB"
	}
	switch req.CompressionFormat {
	case "", "snappy", "gzip", "zip":
	default:
		return 0, nil, errInvalid("compression_format %q must be snappy, gzip or zip", req.CompressionFormat)
	}
	hours := int32(disapi.DefaultRetentionHours)
	if req.DataDuration != nil {
		hours = *req.DataDuration
	}
	if derr := checkRetention(hours); derr != nil {
		return 0, nil, derr
	}
	if derr := checkTags(req.Tags, nil); derr != nil {
		return 0, nil, derr
	}
	ctx := r.Context()
	s.mu.Lock()
	defer s.mu.Unlock()
	bs, err := s.b.CreateStream(ctx, disbackend.StreamSpec{
		Name:           req.StreamName,
		TopicName:      req.StreamName,
		PartitionCount: req.PartitionCount,
		Config: disbackend.StreamConfig{
			Retention:       s.retention(hours),
			TimestampType:   disbackend.CreateTime,
			MaxMessageBytes: maxBodyBytes,
		},
	})
	if err != nil {
		return 0, nil, backendError(err, req.StreamName, "", "")
	}
	ss := &streamState{
		StreamID: streamID(bs.TopicID), StreamType: req.StreamType, DataType: req.DataType,
		DataSchema: req.DataSchema, CompressionFormat: req.CompressionFormat,
		AutoScaleEnabled: req.AutoScaleEnabled, AutoScaleMin: req.AutoScaleMinPartitionCount,
		AutoScaleMax: req.AutoScaleMaxPartitionCount, RetentionHours: hours,
		Writable: req.PartitionCount, Tags: req.Tags, SysTags: req.SysTags,
		LastModified: bs.CreatedAt.UnixMilli(),
	}
	if req.CSVProperties != nil {
		ss.CSVDelimiter = req.CSVProperties.Delimiter
	}
	s.state.Streams[bs.Name] = ss
	if derr := s.saveState(); derr != nil {
		return 0, nil, derr
	}
	return http.StatusCreated, nil, nil
}

func (s *Server) deleteStream(r *http.Request, vars map[string]string, _ []byte) (int, any, *disError) {
	name := vars["stream_name"]
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.b.DeleteStream(r.Context(), name); err != nil {
		return 0, nil, backendError(err, name, "", "")
	}
	delete(s.state.Streams, name)
	if derr := s.saveState(); derr != nil {
		return 0, nil, derr
	}
	return http.StatusNoContent, nil, nil
}

type streamInfo struct {
	StreamName                 string `json:"stream_name"`
	CreateTime                 int64  `json:"create_time"`
	RetentionPeriod            int32  `json:"retention_period"`
	Status                     string `json:"status"`
	StreamType                 string `json:"stream_type"`
	DataType                   string `json:"data_type"`
	PartitionCount             int32  `json:"partition_count"`
	AutoScaleEnabled           bool   `json:"auto_scale_enabled"`
	AutoScaleMinPartitionCount int64  `json:"auto_scale_min_partition_count"`
	AutoScaleMaxPartitionCount int64  `json:"auto_scale_max_partition_count"`
	Tags                       []tag  `json:"tags"`
	SysTags                    []tag  `json:"sys_tags"`
}

func nonNilTags(t []tag) []tag {
	if t == nil {
		return []tag{}
	}
	return t
}

func (s *Server) listStreams(r *http.Request, _ map[string]string, _ []byte) (int, any, *disError) {
	q := r.URL.Query()
	limit, derr := intParam(q.Get("limit"), "limit", disapi.DefaultListStreamsLimit, 1, disapi.MaxListStreamsLimit)
	if derr != nil {
		return 0, nil, derr
	}
	start := q.Get("start_stream_name")
	all, err := s.b.ListStreams(r.Context())
	if err != nil {
		return 0, nil, backendError(err, "", "", "")
	}
	names := []string{}
	infos := []streamInfo{}
	more := false
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, bs := range all { // sorted by name
		if start != "" && bs.Name <= start {
			continue
		}
		if len(names) == limit {
			more = true
			break
		}
		ss := s.stateFor(bs)
		names = append(names, bs.Name)
		infos = append(infos, streamInfo{
			StreamName: bs.Name, CreateTime: bs.CreatedAt.UnixMilli(), RetentionPeriod: ss.RetentionHours,
			Status: "RUNNING", StreamType: ss.StreamType, DataType: ss.DataType, PartitionCount: ss.Writable,
			AutoScaleEnabled: ss.AutoScaleEnabled, AutoScaleMinPartitionCount: ss.AutoScaleMin,
			AutoScaleMaxPartitionCount: ss.AutoScaleMax, Tags: nonNilTags(ss.Tags), SysTags: nonNilTags(ss.SysTags),
		})
	}
	return http.StatusOK, map[string]any{
		"total_number": len(all), "stream_names": names, "has_more_streams": more, "stream_info_list": infos,
	}, nil
}

// intParam parses an optional integer query parameter within [lo, hi].
func intParam(v, name string, def, lo, hi int) (int, *disError) {
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, errInvalid("%s %q must be %d-%d", name, v, lo, hi)
	}
	return n, nil
}

type partitionJSON struct {
	PartitionID         string  `json:"partition_id"`
	Status              string  `json:"status"`
	HashRange           string  `json:"hash_range,omitempty"`
	SequenceNumberRange *string `json:"sequence_number_range,omitempty"`
}

type describeStreamResult struct {
	StreamID               string          `json:"stream_id"`
	StreamName             string          `json:"stream_name"`
	CreateTime             int64           `json:"create_time"`
	LastModifiedTime       int64           `json:"last_modified_time"`
	RetentionPeriod        int32           `json:"retention_period"`
	Status                 string          `json:"status"`
	StreamType             string          `json:"stream_type"`
	DataType               string          `json:"data_type"`
	DataSchema             string          `json:"data_schema,omitempty"`
	CompressionFormat      string          `json:"compression_format,omitempty"`
	CSVProperties          *csvProp        `json:"csv_properties,omitempty"`
	WritablePartitionCount int32           `json:"writable_partition_count"`
	ReadablePartitionCount int32           `json:"readable_partition_count"`
	Partitions             []partitionJSON `json:"partitions"`
	HasMorePartitions      bool            `json:"has_more_partitions"`
	UpdatePartitionCounts  []scaling       `json:"update_partition_counts"`
	Tags                   []tag           `json:"tags"`
	SysTags                []tag           `json:"sys_tags"`
	AutoScaleEnabled       bool            `json:"auto_scale_enabled"`
	AutoScaleMin           int64           `json:"auto_scale_min_partition_count"`
	AutoScaleMax           int64           `json:"auto_scale_max_partition_count"`
}

// describeStream serves DescribeStream (GET
// /v2/{project_id}/streams/{stream_name}): the stream is the path's, or
// the query's stream_id when no stream has the path's name (streamByRef;
// the Java SDK 1.3.x puts an ID subscription's id in the path, in
// stream_name and in stream_id alike).
func (s *Server) describeStream(r *http.Request, vars map[string]string, _ []byte) (int, any, *disError) {
	name := vars["stream_name"]
	q := r.URL.Query()
	limit, derr := intParam(q.Get("limit_partitions"), "limit_partitions", disapi.DefaultDescribePartitionsLimit, 1, disapi.MaxDescribePartitionsLimit)
	if derr != nil {
		return 0, nil, derr
	}
	from := int32(0)
	if v := q.Get("start_partitionId"); v != "" {
		p, ok := disbackend.ParsePartitionID(v)
		if !ok {
			return 0, nil, errf(400, disapi.CodePartitionIDInvalid, "Invalid partition_id. [start_partitionId %s]", v)
		}
		from = p + 1
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	bs, ss, derr := s.streamByRef(r.Context(), name, q.Get("stream_id"))
	if derr != nil {
		return 0, nil, derr
	}
	res := describeStreamResult{
		StreamID: ss.StreamID, StreamName: bs.Name, CreateTime: bs.CreatedAt.UnixMilli(),
		LastModifiedTime: ss.LastModified, RetentionPeriod: ss.RetentionHours, Status: "RUNNING",
		StreamType: ss.StreamType, DataType: ss.DataType, DataSchema: ss.DataSchema,
		CompressionFormat: ss.CompressionFormat, WritablePartitionCount: ss.Writable,
		Partitions: []partitionJSON{}, UpdatePartitionCounts: ss.Scalings,
		Tags: nonNilTags(ss.Tags), SysTags: nonNilTags(ss.SysTags),
		AutoScaleEnabled: ss.AutoScaleEnabled, AutoScaleMin: ss.AutoScaleMin, AutoScaleMax: ss.AutoScaleMax,
	}
	if res.UpdatePartitionCounts == nil {
		res.UpdatePartitionCounts = []scaling{}
	}
	if ss.CSVDelimiter != "" {
		res.CSVProperties = &csvProp{Delimiter: ss.CSVDelimiter}
	}
	for p := int32(0); p < bs.PartitionCount; p++ {
		status := s.partitionStatus(bs, ss, p)
		if status != statusExpired {
			res.ReadablePartitionCount++
		}
		if p < from {
			continue
		}
		if len(res.Partitions) == limit {
			res.HasMorePartitions = true
			continue
		}
		pj := partitionJSON{PartitionID: disbackend.PartitionID(p), Status: status}
		if status == statusActive {
			pj.HashRange = hashRange(p, ss.Writable)
		}
		if status != statusExpired {
			rng, err := s.b.Range(bs.Name, p)
			if err != nil {
				return 0, nil, backendError(err, bs.Name, pj.PartitionID, "")
			}
			v := "[" + strconv.FormatInt(rng.First, 10) + " : " + strconv.FormatInt(rng.Next, 10) + "]"
			pj.SequenceNumberRange = &v
		}
		res.Partitions = append(res.Partitions, pj)
	}
	return http.StatusOK, res, nil
}

type updatePartitionCountRequest struct {
	StreamName           string `json:"stream_name"`
	TargetPartitionCount int32  `json:"target_partition_count"`
}

// updatePartitionCount scales up (reactivating partitions left DELETED,
// then adding new ones that start at sequence number 0) or down (the
// partitions above the target become DELETED: readable, not writable, until
// their data expires). DIS's limits: at most 5 scalings of a stream an
// hour, and none for an hour after a successful one; both answer DIS.4200
// naming the limit (DIS's own code for them is not documented).
func (s *Server) updatePartitionCount(r *http.Request, vars map[string]string, body []byte) (int, any, *disError) {
	name := vars["stream_name"]
	var req updatePartitionCountRequest
	if derr := decodeBody(body, &req); derr != nil {
		return 0, nil, derr
	}
	if req.StreamName != "" && req.StreamName != name {
		return 0, nil, errInvalid("stream_name %q in the body differs from %q in the path", req.StreamName, name)
	}
	if req.TargetPartitionCount <= 0 {
		return 0, nil, errInvalid("target_partition_count %d must be > 0", req.TargetPartitionCount)
	}
	ctx := r.Context()
	s.mu.Lock()
	defer s.mu.Unlock()
	bs, ss, derr := s.streamOf(ctx, name)
	if derr != nil {
		return 0, nil, derr
	}
	now := s.now()
	nowMS := now.UnixMilli()
	src, target := ss.Writable, req.TargetPartitionCount
	if target == src {
		return 0, nil, errInvalid("target_partition_count %d equals the current partition count", target)
	}
	if !s.opts.NoScalingLimits {
		hourAgo := now.Add(-disapi.ScalingWindow).UnixMilli()
		n := 0
		for _, sc := range ss.Scalings {
			if sc.CreateTimestamp <= hourAgo {
				continue
			}
			n++
			if sc.ResultCode == 0 {
				return 0, nil, errInvalid("stream %s was scaled at %s; DIS allows no further scaling for one hour after a successful one",
					name, time.UnixMilli(sc.CreateTimestamp).UTC().Format(time.RFC3339))
			}
		}
		if n >= disapi.MaxScalingsPerHour {
			return 0, nil, errInvalid("stream %s was scaled %d times in the last hour, DIS's limit", name, n)
		}
	}
	if target > bs.PartitionCount {
		if err := s.b.UpdatePartitionCount(ctx, name, target); err != nil {
			return 0, nil, backendError(err, name, "", "")
		}
	}
	if ss.DeletedAt == nil {
		ss.DeletedAt = map[int32]int64{}
	}
	for p := src; p < target; p++ {
		delete(ss.DeletedAt, p)
	}
	for p := target; p < src; p++ {
		ss.DeletedAt[p] = nowMS
	}
	ss.Writable = target
	ss.LastModified = nowMS
	ss.Scalings = append(ss.Scalings, scaling{CreateTimestamp: nowMS, SrcPartitionCount: src, TargetPartitionCount: target})
	if derr := s.saveState(); derr != nil {
		return 0, nil, derr
	}
	return http.StatusOK, nil, nil
}

type updateStreamRequest struct {
	StreamName                 string  `json:"stream_name"`
	DataDuration               *int32  `json:"data_duration"`
	DataType                   *string `json:"data_type"`
	DataSchema                 *string `json:"data_schema"`
	AutoScaleEnabled           *bool   `json:"auto_scale_enabled"`
	AutoScaleMinPartitionCount *int64  `json:"auto_scale_min_partition_count"`
	AutoScaleMaxPartitionCount *int64  `json:"auto_scale_max_partition_count"`
}

// updateStream is the v3 UpdateStream: retention, data type and schema,
// auto-scaling settings. 204.
func (s *Server) updateStream(r *http.Request, vars map[string]string, body []byte) (int, any, *disError) {
	name := vars["stream_name"]
	var req updateStreamRequest
	if derr := decodeBody(body, &req); derr != nil {
		return 0, nil, derr
	}
	if req.StreamName != "" && req.StreamName != name {
		return 0, nil, errInvalid("stream_name %q in the body differs from %q in the path", req.StreamName, name)
	}
	if req.DataDuration != nil {
		if derr := checkRetention(*req.DataDuration); derr != nil {
			return 0, nil, derr
		}
	}
	if req.DataType != nil {
		if derr := checkDataType(*req.DataType); derr != nil {
			return 0, nil, derr
		}
	}
	ctx := r.Context()
	s.mu.Lock()
	defer s.mu.Unlock()
	bs, ss, derr := s.streamOf(ctx, name)
	if derr != nil {
		return 0, nil, derr
	}
	if req.DataDuration != nil {
		cfg := bs.Config
		cfg.Retention = s.retention(*req.DataDuration)
		if err := s.b.UpdateStreamConfig(ctx, name, cfg); err != nil {
			return 0, nil, backendError(err, name, "", "")
		}
		ss.RetentionHours = *req.DataDuration
	}
	if req.DataType != nil && *req.DataType != "" {
		ss.DataType = *req.DataType
	}
	if req.DataSchema != nil {
		ss.DataSchema = *req.DataSchema
	}
	if req.AutoScaleEnabled != nil {
		ss.AutoScaleEnabled = *req.AutoScaleEnabled
	}
	if req.AutoScaleMinPartitionCount != nil {
		ss.AutoScaleMin = *req.AutoScaleMinPartitionCount
	}
	if req.AutoScaleMaxPartitionCount != nil {
		ss.AutoScaleMax = *req.AutoScaleMaxPartitionCount
	}
	ss.LastModified = s.now().UnixMilli()
	if derr := s.saveState(); derr != nil {
		return 0, nil, derr
	}
	return http.StatusNoContent, nil, nil
}

// listPolicies answers the stream's policies: dislocal has no accounts to
// share a stream with, so there are no rules.
func (s *Server) listPolicies(r *http.Request, vars map[string]string, _ []byte) (int, any, *disError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ss, derr := s.streamOf(r.Context(), vars["stream_name"])
	if derr != nil {
		return 0, nil, derr
	}
	return http.StatusOK, map[string]any{"stream_id": ss.StreamID, "rules": []any{}}, nil
}

// Dump tasks are not emulated: a stream has none, creating one fails as
// without an IAM agency (DIS.4335), and naming one answers DIS.4354.
func (s *Server) listTransferTasks(r *http.Request, vars map[string]string, _ []byte) (int, any, *disError) {
	if derr := s.streamExists(r, vars["stream_name"]); derr != nil {
		return 0, nil, derr
	}
	return http.StatusOK, map[string]any{"total_number": 0, "quota": disapi.MaxTransferTasksPerStream, "tasks": []any{}}, nil
}

func (s *Server) createTransferTask(r *http.Request, vars map[string]string, _ []byte) (int, any, *disError) {
	if derr := s.streamExists(r, vars["stream_name"]); derr != nil {
		return 0, nil, derr
	}
	return 0, nil, errf(400, disapi.CodeAgencyInvalid, "Invalid IAM agency. [dislocal does not run dump tasks]")
}

func (s *Server) transferTaskMissing(r *http.Request, vars map[string]string, _ []byte) (int, any, *disError) {
	if derr := s.streamExists(r, vars["stream_name"]); derr != nil {
		return 0, nil, derr
	}
	return 0, nil, errf(400, disapi.CodeTransferTaskNotFound, "The dump task does not exist. [dislocal does not run dump tasks]")
}

// metrics are not collected (the request counts are at /dislocal/stats).
func (s *Server) metrics(r *http.Request, vars map[string]string, _ []byte) (int, any, *disError) {
	if derr := s.streamExists(r, vars["stream_name"]); derr != nil {
		return 0, nil, derr
	}
	return 0, nil, errf(400, disapi.CodeMetricsLabelInvalid, "Invalid metrics label. [dislocal does not collect DIS metrics; see GET /dislocal/stats]")
}

func (s *Server) streamExists(r *http.Request, name string) *disError {
	if _, err := s.b.DescribeStream(r.Context(), name); err != nil {
		return backendError(err, name, "", "")
	}
	return nil
}

// sortTags orders tags by key, as DIS lists them.
func sortTags(t []tag) {
	sort.Slice(t, func(i, j int) bool { return t[i].Key < t[j].Key })
}
