package disapi

// PutRecordsRequest is the JSON body of PutRecords (POST
// /v2/{project_id}/records): disrest sends it, dislocal reads it (and also
// the protobuf PutRecordsRequest of the DIS SDKs). The SDK's Go model lacks
// the records' timestamp, which the Java SDK and the protobuf schema have.
// Fields that are empty when disrest sends them are omitted, so its
// requests carry stream_name and records, and in each record data,
// partition_id and, when set, partition_key and timestamp.
type PutRecordsRequest struct {
	StreamName string `json:"stream_name"`
	// StreamID names the stream when StreamName is empty or names none
	// (docs/dis-api.md §2.5; dislocal reads it, disrest leaves it empty).
	StreamID string                   `json:"stream_id,omitempty"`
	Records  []PutRecordsRequestEntry `json:"records"`
}

// PutRecordsRequestEntry is one record of a PutRecordsRequest.
type PutRecordsRequestEntry struct {
	// Data is the record's bytes in standard Base64; required (nil when
	// the field is absent or null).
	Data *string `json:"data"`
	// ExplicitHashKey, a decimal in 0 … 2^63−1, picks the partition by
	// hash when PartitionID is empty (dislocal reads it; disrest leaves it
	// empty).
	ExplicitHashKey string `json:"explicit_hash_key,omitempty"`
	// PartitionID is the partition, as "shardId-0000000003" (or "3").
	PartitionID string `json:"partition_id"`
	// PartitionKey is the record's key; when neither PartitionID nor
	// ExplicitHashKey is set it picks the partition by its MD5 hash. nil
	// when absent.
	PartitionKey *string `json:"partition_key,omitempty"`
	// Timestamp is the record's time, unix ms; nil when absent.
	Timestamp *int64 `json:"timestamp,omitempty"`
}
