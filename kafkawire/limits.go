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
// config names, coordinator keys, ...): 524288. A request declaring more is
// refused whole (ErrTooManyEntries), as Kafka closes the connection on a
// request it cannot read. Kafka itself has no such limit; no real client
// comes near it (100 000 topics of 4 partitions each).
const MaxRequestEntries = 1 << 19

// ErrTooManyEntries: the request declares more than MaxRequestEntries
// entries. It is returned wrapped together with ErrMalformed.
var ErrTooManyEntries = errors.New("request declares too many entries")

// peek walks a request body's arrays without decoding them.
type peek struct {
	rd      kbin.Reader
	flex    bool
	entries int
	over    bool
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
		return p.entries, fmt.Errorf("%w: %w: %s v%d declares over %d entries", ErrMalformed, ErrTooManyEntries,
			kmsg.NameForKey(key), version, MaxRequestEntries)
	}
	return p.entries, nil
}
