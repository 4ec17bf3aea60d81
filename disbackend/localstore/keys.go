package localstore

import "encoding/binary"

// Pebble key layout (metadata only; batches live in segment files). Every
// key starts with a one-byte prefix naming its kind. Per-stream keys carry
// the stream's internal number (sid, 8 bytes big-endian, never reused, so a
// re-created stream can never see an old stream's keys) rather than its
// name; partitions are uint32 big-endian so that byte order is numeric
// order.
//
//	'm' name                          stream metadata (JSON streamMeta)
//	'f' sid part                      partition first-offset floor (8 bytes)
//	'a'                               producer-id allocator: next id not yet reserved
//	'c'                               next stream number (sid) to hand out
//	'u'                               the cluster id (Kafka Metadata), made at the first Open
//	'C' sid                           the log cleaner's state of a compacted stream (JSON cleanerState)
//	'G' group                         a consumer group's membership (disbackend.GroupStateStore)
//	'A' app                           app (apps.go)
//	'K' app 0 stream 0 part           checkpoint (apps.go)
//	'L'                               the ACL bindings (JSON []disbackend.ACL, acls.go)
//	'S' user                          SCRAM credentials (JSON []disbackend.ScramCredential, credentials.go)
//	'T' key                           a transaction coordinator record (disbackend.TxnStateStore)
const (
	prefixMeta       = 'm'
	prefixFloor      = 'f'
	keyAllocator     = 'a'
	keySidCounter    = 'c'
	keyClusterID     = 'u'
	prefixCleaner    = 'C'
	prefixGroup      = 'G'
	prefixApp        = 'A'
	prefixCheckpoint = 'K'
	keyACLs          = 'L'
	prefixScram      = 'S'
	prefixTxn        = 'T'
)

const partKeyLen = 1 + 8 + 4 // prefix, sid, partition

func metaKey(name string) []byte {
	k := make([]byte, 1+len(name))
	k[0] = prefixMeta
	copy(k[1:], name)
	return k
}

// partKey returns prefix|sid|part.
func partKey(prefix byte, sid uint64, part int32) []byte {
	k := make([]byte, partKeyLen)
	k[0] = prefix
	binary.BigEndian.PutUint64(k[1:], sid)
	binary.BigEndian.PutUint32(k[9:], uint32(part))
	return k
}

// streamSpan returns [start, end) covering every key of prefix for sid.
func streamSpan(prefix byte, sid uint64) (start, end []byte) {
	start = make([]byte, 9)
	start[0] = prefix
	binary.BigEndian.PutUint64(start[1:], sid)
	end = make([]byte, 9)
	end[0] = prefix
	binary.BigEndian.PutUint64(end[1:], sid+1)
	return start, end
}

func putInt64(v int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(v)) }

func getInt64(v []byte) (int64, bool) {
	if len(v) != 8 {
		return 0, false
	}
	return int64(binary.BigEndian.Uint64(v)), true
}
