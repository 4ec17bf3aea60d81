package kafkawire

import "github.com/twmb/franz-go/pkg/kmsg"

// RequestCost bounds what one request may cost in memory, so the
// connection reader can reserve it from a budget before reading the
// frame's body.
//
// Design: a factor per API key over the frame size, with a plateau where
// peekEntries bounds the entries. kmsg refuses arrays that declare more
// entries than the remaining bytes can hold, so the entries of a frame are
// at most frameLen / (smallest entry); each entry costs a bounded number
// of bytes to decode (a struct, strings copied) and to answer (a response
// entry, its encoding, lookups). The worst case is then a constant times
// the frame: the factor. For the request types peekEntries walks, no
// request has more than MaxRequestEntries entries, so past a size the cost
// stops growing with entries: only with the bytes of names and values,
// 4 times the frame at most (decoded copy, the answer's copy, the answer
// buffer growing by doubling).
//
// The factors and plateaus are measured (gateway's
// TestRequestCostCoversEveryAPI: for every key and version served,
// requests of minimal entries, many at the top level, some at every level,
// and as many as allowed; bytes allocated from sending the frame to
// reading the answer) with a quarter added. Allocated bytes include the
// garbage of the handling, so the live memory is lower.

const (
	// costBase is what any request costs besides its entries: the decoded
	// header and body struct, the request's context, log fields, the
	// response buffer.
	costBase = 64 << 10
	// maxDecodeFactor bounds the bytes decoding allocates per frame byte,
	// for any API key and version kmsg knows (measured worst: 27 times,
	// StopReplica; Metadata v0 24 times; kafkawire's TestDecodeCostBound).
	maxDecodeFactor = 32
	// textFactor bounds, per frame byte, the memory of names and values
	// past the plateau.
	textFactor = 4
)

// keyCost is one API key's factor (bytes per frame byte) and plateau
// (bytes, 0 for none).
type keyCost struct {
	factor  int64
	plateau int64
}

// keyCosts are the measured bounds of the API keys the gateway serves; a
// key not listed is decoded and refused (its connection closed), so it
// costs at most decoding. The comments give the measured worst case.
var keyCosts = map[int16]keyCost{
	0:  {59, 180 << 20},   // Produce: 47x (61-byte batches that do not decode); 142 MB at the ceiling; 14.6x for one-record batches
	1:  {92, 145 << 20},   // Fetch: 74x; 116 MB
	2:  {45, 78 << 20},    // ListOffsets: 36x; 62 MB
	3:  {100, 203 << 20},  // Metadata: 80x (distinct unknown names: a backend lookup each); 162 MB
	8:  {273, 253 << 20},  // OffsetCommit: 218x; 202 MB
	9:  {244, 150 << 20},  // OffsetFetch: 195x; 120 MB
	10: {135, 32 << 20},   // FindCoordinator: 108x; 26 MB
	11: {24, 0},           // JoinGroup: 19x
	12: {32, 0},           // Heartbeat: no arrays
	13: {27, 0},           // LeaveGroup: 21x
	14: {24, 0},           // SyncGroup: 19x
	15: {283, 161 << 20},  // DescribeGroups: 226x; 128 MB (distinct ids)
	16: {28, 0},           // ListGroups: 22x
	18: {32, 0},           // ApiVersions: no arrays
	19: {116, 294 << 20},  // CreateTopics: 93x; 235 MB
	20: {262, 92 << 20},   // DeleteTopics: 210x; 74 MB
	21: {78, 77 << 20},    // DeleteRecords: 62.5x (distinct unknown names: a backend lookup each); 61 MB
	22: {32, 0},           // InitProducerID: no arrays
	23: {135, 109 << 20},  // OffsetForLeaderEpoch: 108x; 87 MB
	24: {195, 156 << 20},  // AddPartitionsToTxn: 155.5x; 125 MB
	27: {135, 109 << 20},  // WriteTxnMarkers: 108x; 87 MB
	28: {211, 169 << 20},  // TxnOffsetCommit: 169x; 135 MB
	32: {46, 68 << 20},    // DescribeConfigs: 37x; 54 MB
	33: {104, 54 << 20},   // AlterConfigs: 83x; 43 MB
	34: {135, 109 << 20},  // AlterReplicaLogDirs: 107.5x; 87 MB
	35: {24, 20 << 20},    // DescribeLogDirs: 18.5x; 16 MB
	37: {69, 71 << 20},    // CreatePartitions: 55x; 56 MB
	42: {219, 37 << 20},   // DeleteGroups: 175x; 29 MB
	43: {45, 38 << 20},    // ElectLeaders: 36x; 30 MB
	44: {104, 54 << 20},   // IncrementalAlterConfigs: 83x; 43 MB
	45: {81, 127 << 20},   // AlterPartitionAssignments: 64x; 101 MB
	46: {23, 18 << 20},    // ListPartitionReassignments: 18x; 14 MB
	47: {12, 17 << 20},    // OffsetDelete: 9x; 14 MB
	60: {32, 0},           // DescribeCluster: no arrays
	61: {174, 183 << 20},  // DescribeProducers: 139x; 146 MB
	65: {897, 235 << 20},  // DescribeTransactions: 718x (distinct ids); 188 MB
	69: {1032, 270 << 20}, // ConsumerGroupDescribe: 825x (distinct ids); 216 MB
	74: {4, 0},            // ListConfigResources: 3.1x (an array of int8)
	75: {72, 38 << 20},    // DescribeTopicPartitions: 57x (distinct unknown names: a backend lookup each); 30 MB
}

// RequestCost returns an upper bound, in bytes, of the memory decoding and
// answering a request of API key at version may take, given its frame
// length (the size prefix, before the body is read): the frame itself,
// costBase, and the key's factor times the frame, or, for a key whose
// entries are bounded, its plateau plus 4 times the frame when that is
// less. An unknown key costs the frame and costBase (ParseRequest refuses
// it before decoding).
func RequestCost(key, version int16, frameLen int) int64 {
	n := int64(max(frameLen, 0))
	c, ok := keyCosts[key]
	if !ok {
		if kmsg.RequestForKey(key) == nil {
			return costBase + n
		}
		c = keyCost{factor: maxDecodeFactor}
	}
	extra := c.factor * n
	if c.plateau > 0 {
		extra = min(extra, c.plateau+textFactor*n)
	}
	return costBase + n + extra
}

// producePartitionCost bounds, in bytes, what one partition entry of a
// Produce request costs besides its record bytes: its decoded struct, its
// validation, its append job and its answer (measured worst 47 times a
// 61-byte batch that does not decode, about 2.9 KB; gateway's
// TestProduceMinimalBatchesCost).
const producePartitionCost = 4 << 10

// ProduceHeadCost is what a Produce frame of frameLen bytes is reserved
// before its body is read: costBase, the frame, and as much again for the
// record batches' validation. Once the body is counted, ProduceCost gives
// the whole cost.
func ProduceHeadCost(frameLen int) int64 {
	return costBase + 2*int64(max(frameLen, 0))
}

// ProduceCost bounds, in bytes, what a Produce request of frameLen bytes
// declaring partitions partition entries (Request.Entries counts its topics
// and partitions) may cost: ProduceHeadCost plus producePartitionCost per
// entry, and never more than RequestCost's bound by the frame alone.
// Ordinary produces (a few batches of kilobytes or more) cost about twice
// their frame, not RequestCost's 59 times.
func ProduceCost(frameLen, entries int) int64 {
	return min(RequestCost(0, 0, frameLen), ProduceHeadCost(frameLen)+int64(max(entries, 0))*producePartitionCost)
}
