package disapi

import "time"

// DIS's limits (docs/dis-api.md §2-§6). DIS documents sizes in MB; like
// the SDKs, these take 1 MB as 1 MiB (1 << 20 bytes). Limits by stream type
// are named Common... (stream_type COMMON) and Advanced... (ADVANCED).

// Write and read rates of one partition (docs/dis-api.md §6.1): a
// partition takes its write bytes or its write records per second,
// whichever it reaches first; a PutRecords beyond them is refused with
// CodeFlowControl.
const (
	// CommonWriteBytesPerSec is a COMMON partition's write rate: 1 MB/s.
	CommonWriteBytesPerSec = 1 << 20
	// CommonWriteRecordsPerSec is a COMMON partition's write rate: 1,000
	// records/s.
	CommonWriteRecordsPerSec = 1000
	// CommonReadBytesPerSec is a COMMON partition's read rate: 2 MB/s.
	CommonReadBytesPerSec = 2 << 20
	// AdvancedWriteBytesPerSec is an ADVANCED partition's write rate:
	// 5 MB/s.
	AdvancedWriteBytesPerSec = 5 << 20
	// AdvancedWriteRecordsPerSec is an ADVANCED partition's write rate:
	// 2,000 records/s.
	AdvancedWriteRecordsPerSec = 2000
	// AdvancedReadBytesPerSec is an ADVANCED partition's read rate:
	// 10 MB/s.
	AdvancedReadBytesPerSec = 10 << 20
)

// Sizes of records and requests (docs/dis-api.md §6.1).
const (
	// MaxRecordBytes is the largest payload of one record, before Base64:
	// 1 MB.
	MaxRecordBytes = 1 << 20
	// CommonPutRecordsBytes bounds the record bytes (partition keys
	// excluded) of one PutRecords to a COMMON stream: 1 MB.
	CommonPutRecordsBytes = 1 << 20
	// AdvancedPutRecordsBytes bounds the record bytes (partition keys
	// excluded) of one PutRecords to an ADVANCED stream: 5 MB.
	AdvancedPutRecordsBytes = 5 << 20
)

// GetRecords and cursors (docs/dis-api.md §2.3, §2.4).
const (
	// DefaultGetRecordsLimit is GetRecords' limit (records per answer) when
	// the request has none: 1000 (Python SDK doc; the server's default is
	// UNCONFIRMED).
	DefaultGetRecordsLimit = 1000
	// MaxGetRecordsLimit is the largest GetRecords limit: 10000 records
	// (Python SDK doc; UNCONFIRMED on the server).
	MaxGetRecordsLimit = 10000
	// CursorLifetime is how long a partition cursor (from GetCursor or a
	// next_partition_cursor) is valid: 5 minutes.
	CursorLifetime = 5 * time.Minute
	// MaxCursorLen is the longest partition cursor: 512 characters.
	MaxCursorLen = 512
)

// Streams, apps and checkpoints (docs/dis-api.md §3, §4, §6.1).
const (
	// MinRetentionHours is the shortest data_duration: 24 hours.
	MinRetentionHours = 24
	// MaxRetentionHours is the longest data_duration: 168 hours. The API
	// reference says 24-72, the SDK guide 24-168 (deployment dependent);
	// dislocal and recent deployments take 168.
	MaxRetentionHours = 168
	// DefaultRetentionHours is data_duration when CreateStream has none:
	// 24 hours.
	DefaultRetentionHours = 24
	// MaxStreamNameLen is the longest stream name: 64 characters of
	// [A-Za-z0-9_-].
	MaxStreamNameLen = 64
	// MaxAppNameLen is the longest app name: 200 characters of
	// [A-Za-z0-9_-].
	MaxAppNameLen = 200
	// MaxCheckpointMetadataLen is the longest checkpoint metadata: 1000
	// characters.
	MaxCheckpointMetadataLen = 1000
	// MaxScalingsPerHour is how many UpdatePartitionCount a stream takes
	// within ScalingWindow: 5.
	MaxScalingsPerHour = 5
	// ScalingWindow is the window of MaxScalingsPerHour, and how long after
	// a successful scaling no further one is allowed: one hour.
	ScalingWindow = time.Hour
	// MaxTransferTasksPerStream is the dump task quota of a stream: 5.
	MaxTransferTasksPerStream = 5
)

// Stream tags (docs/dis-api.md §5.2).
const (
	// MaxTagsPerStream is how many tags a stream may have: 10.
	MaxTagsPerStream = 10
	// MaxTagKeyLen is the longest tag key: 36 characters (at least 1).
	MaxTagKeyLen = 36
	// MaxTagValueLen is the longest tag value: 43 characters.
	MaxTagValueLen = 43
	// MaxTagFilterLimit is the largest limit of a resource filter by tags:
	// 1000 resources.
	MaxTagFilterLimit = 1000
)

// Paging of list operations (docs/dis-api.md §3.2, §3.3, §4): each takes
// a limit between 1 and its Max, Default when absent.
const (
	// DefaultListStreamsLimit is ListStreams' limit when absent: 10
	// streams.
	DefaultListStreamsLimit = 10
	// MaxListStreamsLimit is ListStreams' largest limit: 100 streams.
	MaxListStreamsLimit = 100
	// DefaultListAppsLimit is ListApps' limit when absent: 10 apps, as
	// ListStreams (DIS documents none).
	DefaultListAppsLimit = 10
	// MaxListAppsLimit is ListApps' largest limit: 100 apps.
	MaxListAppsLimit = 100
	// DefaultDescribePartitionsLimit is DescribeStream's limit_partitions
	// when absent: 100 partitions.
	DefaultDescribePartitionsLimit = 100
	// MaxDescribePartitionsLimit is DescribeStream's largest
	// limit_partitions: 1000 partitions.
	MaxDescribePartitionsLimit = 1000
	// DefaultConsumerStateLimit is ShowConsumerState's limit when absent:
	// 100 partitions.
	DefaultConsumerStateLimit = 100
	// MaxConsumerStateLimit is ShowConsumerState's largest limit: 1000
	// partitions.
	MaxConsumerStateLimit = 1000
)
