package kafkawire

// Entry counts, checked before kmsg decodes a body.
//
// kmsg (v1.15+) already refuses an array whose declared count times the
// smallest encoding of its entry exceeds the bytes left, so a count cannot
// promise more entries than the frame holds. That still lets a 20 MiB
// Metadata v0 request declare ten million empty topic names, each decoded
// into a 48-byte struct and then answered. peekEntries reads the declared
// counts of the arrays of the requests that loop over entries, skipping
// the entries themselves, and refuses a request whose arrays declare more
// than MaxRequestEntries entries in all, before anything is allocated. The
// gateway's configured per-request caps (topics, partitions, groups) are
// below this ceiling; entries between a cap and the ceiling are answered
// with an error code per entry.

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// MaxRequestEntries is the most entries one request may declare, summed
// over the arrays peekEntries reads (topics, partitions, groups, resources,
// config names, coordinator keys, ...): 262144. A request declaring more is
// refused whole (ErrTooManyEntries), as Kafka closes the connection on a
// request it cannot read. Kafka itself has no such limit; no real client
// comes near it (20 000 topics of 10 partitions each is 220 000).
const MaxRequestEntries = 1 << 18

// MaxProducePartitionsWithoutBatch is the most partitions one Produce may
// carry whose records are shorter than a record batch header (61 bytes;
// null or empty included): 1000. Kafka answers each with CORRUPT_MESSAGE;
// no producer sends them, and a request of only such entries costs 70
// times its size to answer, against 15 for real batches. More refuse the
// request whole (ErrTooManyEntries).
const MaxProducePartitionsWithoutBatch = 1000

// minBatchBytes is the size of a record batch header (v2).
const minBatchBytes = 61

// ErrTooManyEntries: the request declares more than MaxRequestEntries
// entries. It is returned wrapped together with ErrMalformed.
var ErrTooManyEntries = errors.New("request declares too many entries")

// peek walks a request body's arrays without decoding them.
type peek struct {
	rd      kbin.Reader
	flex    bool
	entries int
	over    bool
	// noBatches counts produce partitions with no record batch.
	noBatches int
}

func (p *peek) skip(n int) { p.rd.Span(n) }

// str skips a string, nullable or not.
func (p *peek) str() {
	if p.flex {
		if l := int(p.rd.Uvarint()) - 1; l > 0 {
			p.rd.Span(l)
		}
		return
	}
	if l := int(p.rd.Int16()); l > 0 {
		p.rd.Span(l)
	}
}

// bytes skips a byte array, nullable or not, and returns its length (-1
// null).
func (p *peek) bytes() int {
	var l int
	if p.flex {
		l = int(p.rd.Uvarint()) - 1
	} else {
		l = int(p.rd.Int32())
	}
	if l > 0 {
		p.rd.Span(l)
	}
	return l
}

// noBatch counts a produce partition without a record batch; past
// MaxProducePartitionsWithoutBatch it stops the walk.
func (p *peek) noBatch() {
	if p.noBatches++; p.noBatches > MaxProducePartitionsWithoutBatch {
		p.over = true
		p.rd.Span(-1)
	}
}

func (p *peek) tags() {
	if p.flex {
		kmsg.SkipTags(&p.rd)
	}
}

// array reads an array length (null reads as 0) and counts its entries;
// past the ceiling it stops the walk (the reader goes bad, every later
// read is zero).
func (p *peek) array() int {
	var n int32
	if p.flex {
		n = p.rd.CompactArrayLen()
	} else {
		n = p.rd.ArrayLen()
	}
	if n <= 0 || !p.rd.Ok() {
		return 0
	}
	p.entries += int(n)
	if p.entries > MaxRequestEntries {
		p.over = true
		p.rd.Span(-1) // stop
		return 0
	}
	return int(n)
}

// topic skips a topic's name, or its id.
func (p *peek) topic(byID bool) {
	if byID {
		p.skip(16)
	} else {
		p.str()
	}
}

// strings skips an array of strings.
func (p *peek) strings() {
	for range p.array() {
		p.str()
	}
}

// int32s skips an array of int32.
func (p *peek) int32s() { p.skip(4 * p.array()) }

// peekers are the walks of the request types that loop over entries, by
// API key; each reads the body of version v up to its last array.
var peekers = map[int16]func(p *peek, v int16){
	0: func(p *peek, v int16) { // Produce
		if v >= 3 {
			p.str() // transactional id
		}
		p.skip(2 + 4) // acks, timeout
		for range p.array() {
			p.topic(v >= 13)
			for range p.array() {
				p.skip(4)
				if p.bytes() < minBatchBytes {
					p.noBatch()
				}
				p.tags()
			}
			p.tags()
		}
	},
	1: func(p *peek, v int16) { // Fetch
		if v <= 14 {
			p.skip(4) // replica id
		}
		p.skip(4 + 4) // max wait, min bytes
		if v >= 3 {
			p.skip(4) // max bytes
		}
		if v >= 4 {
			p.skip(1) // isolation level
		}
		if v >= 7 {
			p.skip(4 + 4) // session id, epoch
		}
		fixed := 4 + 8 + 4 // partition, fetch offset, partition max bytes
		if v >= 9 {
			fixed += 4 // current leader epoch
		}
		if v >= 12 {
			fixed += 4 // last fetched epoch
		}
		if v >= 5 {
			fixed += 8 // log start offset
		}
		for range p.array() {
			p.topic(v >= 13)
			for range p.array() {
				p.skip(fixed)
				p.tags()
			}
			p.tags()
		}
		if v >= 7 {
			for range p.array() { // forgotten topics
				p.topic(v >= 13)
				p.int32s()
				p.tags()
			}
		}
	},
	2: func(p *peek, v int16) { // ListOffsets
		p.skip(4) // replica id
		if v >= 2 {
			p.skip(1) // isolation level
		}
		fixed := 4 + 8 // partition, timestamp
		if v == 0 {
			fixed += 4 // max num offsets
		}
		if v >= 4 {
			fixed += 4 // current leader epoch
		}
		for range p.array() {
			p.str()
			for range p.array() {
				p.skip(fixed)
				p.tags()
			}
			p.tags()
		}
	},
	3: func(p *peek, v int16) { // Metadata
		for range p.array() {
			if v >= 10 {
				p.skip(16)
			}
			p.str()
			p.tags()
		}
	},
	8: func(p *peek, v int16) { // OffsetCommit
		p.str() // group
		if v >= 1 {
			p.skip(4) // generation
			p.str()   // member id
		}
		if v >= 7 {
			p.str() // instance id
		}
		if v >= 2 && v <= 4 {
			p.skip(8) // retention
		}
		fixed := 4 + 8 // partition, offset
		if v == 1 {
			fixed += 8 // timestamp
		}
		if v >= 6 {
			fixed += 4 // leader epoch
		}
		for range p.array() {
			if v >= 10 {
				p.skip(16)
			} else {
				p.str()
			}
			for range p.array() {
				p.skip(fixed)
				p.str() // metadata
				p.tags()
			}
			p.tags()
		}
	},
	9: func(p *peek, v int16) { // OffsetFetch
		topics := func() {
			for range p.array() {
				if v >= 10 {
					p.skip(16)
				} else {
					p.str()
				}
				p.int32s()
				p.tags()
			}
		}
		if v <= 7 {
			p.str() // group
			topics()
			return
		}
		for range p.array() {
			p.str() // group
			if v >= 9 {
				p.str()   // member id
				p.skip(4) // member epoch
			}
			topics()
			p.tags()
		}
	},
	10: func(p *peek, v int16) { // FindCoordinator
		if v >= 4 {
			p.skip(1) // key type
			p.strings()
		}
	},
	15: func(p *peek, _ int16) { p.strings() }, // DescribeGroups
	19: func(p *peek, _ int16) { // CreateTopics
		for range p.array() {
			p.str()
			p.skip(4 + 2) // partitions, replication factor
			for range p.array() {
				p.skip(4) // partition
				p.int32s()
				p.tags()
			}
			for range p.array() {
				p.str()
				p.str()
				p.tags()
			}
			p.tags()
		}
	},
	20: func(p *peek, v int16) { // DeleteTopics
		if v <= 5 {
			p.strings()
			return
		}
		for range p.array() {
			p.str()
			p.skip(16)
			p.tags()
		}
	},
	21: func(p *peek, _ int16) { // DeleteRecords
		for range p.array() {
			p.str()
			for range p.array() {
				p.skip(4 + 8) // partition, offset
				p.tags()
			}
			p.tags()
		}
	},
	23: func(p *peek, v int16) { // OffsetForLeaderEpoch
		if v >= 3 {
			p.skip(4) // replica id
		}
		fixed := 4 + 4 // partition, leader epoch
		if v >= 2 {
			fixed += 4 // current leader epoch
		}
		for range p.array() {
			p.str()
			for range p.array() {
				p.skip(fixed)
				p.tags()
			}
			p.tags()
		}
	},
	32: func(p *peek, _ int16) { // DescribeConfigs
		for range p.array() {
			p.skip(1) // resource type
			p.str()
			p.strings() // config names
			p.tags()
		}
	},
	33: func(p *peek, _ int16) { // AlterConfigs
		for range p.array() {
			p.skip(1)
			p.str()
			for range p.array() {
				p.str()
				p.str()
				p.tags()
			}
			p.tags()
		}
	},
	34: func(p *peek, _ int16) { // AlterReplicaLogDirs
		for range p.array() {
			p.str() // path
			for range p.array() {
				p.str()
				p.int32s()
				p.tags()
			}
			p.tags()
		}
	},
	35: func(p *peek, _ int16) { // DescribeLogDirs
		for range p.array() {
			p.str()
			p.int32s()
			p.tags()
		}
	},
	37: func(p *peek, _ int16) { // CreatePartitions
		for range p.array() {
			p.str()
			p.skip(4) // count
			for range p.array() {
				p.int32s()
				p.tags()
			}
			p.tags()
		}
	},
	42: func(p *peek, _ int16) { p.strings() }, // DeleteGroups
	44: func(p *peek, _ int16) { // IncrementalAlterConfigs
		for range p.array() {
			p.skip(1)
			p.str()
			for range p.array() {
				p.str()
				p.skip(1) // op
				p.str()
				p.tags()
			}
			p.tags()
		}
	},
	47: func(p *peek, _ int16) { // OffsetDelete
		p.str()
		for range p.array() {
			p.str()
			p.int32s()
		}
	},
}

// peekEntries counts the entries body declares (0 for a request type it
// does not walk) and returns ErrTooManyEntries past MaxRequestEntries. A
// body it cannot walk (truncated) is left to kmsg, which reports it.
func peekEntries(key, version int16, flexible bool, body []byte) (int, error) {
	walk := peekers[key]
	if walk == nil {
		return 0, nil
	}
	p := peek{rd: kbin.Reader{Src: body}, flex: flexible}
	walk(&p, version)
	if p.over {
		return p.entries, fmt.Errorf("%w: %w: %s v%d declares over %d entries (or over %d produce partitions without a batch)",
			ErrMalformed, ErrTooManyEntries, kmsg.NameForKey(key), version, MaxRequestEntries, MaxProducePartitionsWithoutBatch)
	}
	return p.entries, nil
}
