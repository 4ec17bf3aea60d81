package disrest

// Kept commits: what a Kafka commit holds that a DIS checkpoint cannot
// (for operators: docs/dis-backend.md, "Kept commits").
//
// A group's committed offset is its app's LAST_READ checkpoint (apps.go),
// which DIS takes only inside the partition's sequence-number range
// [first : next], both ends included (DIS.4224 otherwise; docs/dis-api.md,
// "Apps and checkpoints"), and which has no leader epoch. Kafka takes any
// offset: below the log start (a slow consumer whose records retention just
// expired), past the end, on an empty partition. So the gateway keeps, per
// app, stream and partition, a record beside the app's checkpoint, as the
// checkpoint of the app's side app (epochApp: "__disgw-epoch-<app>") on the
// same partition at the same sequence number (the "base"), its metadata
// being one of:
//
//	"<epoch>"                                  an offset DIS holds, with its leader epoch
//	"kept;offset=<n>;epoch=<e>;meta=<16 hex>"  an offset DIS cannot hold
//
// For an offset DIS cannot hold, the app's own checkpoint is set to the
// nearest sequence number DIS accepts (the partition's log start for an
// offset below it, its next sequence number for one past the end, 0 on a new
// empty partition), with the commit's metadata: a DIS application reading
// the app (the DIS Kafka Adapter, the SDKs) resumes where a Kafka consumer
// whose offset is out of range resets to (nothing older is kept, nothing
// newer written yet), and the consumer lag DIS shows is what remains to read
// from there. "meta" is the first 8 bytes of the SHA-256 of that metadata,
// in hex.
//
// The rule (keptCommit.over, the one place it is applied): a record counts
// only while the app's checkpoint still has its base and, for a "kept"
// record, metadata with its digest. Whichever was written later wins: a
// commit through the gateway writes both (the checkpoint and, once the side
// app exists, the record); a DIS client commits only the checkpoint, and
// moving it to another sequence number or other metadata makes the record
// stale, so the checkpoint reads as the DIS client wrote it (leader epoch
// -1). The one ambiguous case: a DIS client committing exactly the base with
// exactly the kept commit's metadata leaves the kept offset in force (DIS
// keeps no commit time to tell the two apart).
//
// Storage and cost: one more app per group (created at the group's first
// commit with a leader epoch or an offset DIS cannot hold) and one more
// CommitCheckpoint per partition and commit from then on; reading is one
// more ShowApp, ShowConsumerState and GetCheckpoint per partition, as for
// the app itself. Both live in DIS, so a restarted gateway or another node
// reads the same. DeleteCheckpoints and DeleteApp remove the records with
// the checkpoints.
//
// Reuse: writeKept and readKept take the side app's name, so a later user
// (transactional offsets held until their transaction commits, fencing of
// several nodes' or KIP-848 members' commits) can keep records under an app
// of its own and apply keptCommit.over or its own rule. A record holds the
// offset, the epoch and a digest of the metadata, not the metadata itself
// (at most 1000 characters, as DIS's checkpoint metadata).

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/disbackend/disapi"
)

// keptCommit is one side record: the Kafka commit that the app's checkpoint
// at Base stands for.
type keptCommit struct {
	// Base is the sequence number of the app's checkpoint the record
	// belongs to (and the record's own sequence number).
	Base int64
	// Offset is the Kafka committed offset; Base for an epoch record.
	Offset int64
	// LeaderEpoch is the committed leader epoch, -1 for none.
	LeaderEpoch int32
	// MetaSum is metaSum of the commit's metadata; "" for an epoch record,
	// which is checked by its base alone.
	MetaSum string
}

const keptPrefix = "kept;"

// metaSum is the first 8 bytes of the SHA-256 of meta, in hex.
func metaSum(meta string) string {
	sum := sha256.Sum256([]byte(meta))
	return hex.EncodeToString(sum[:8])
}

// keptFor is the record of cp kept at base: an epoch record when DIS holds
// the offset itself (base is the offset), else a kept one.
func keptFor(cp disbackend.Checkpoint, base int64) keptCommit {
	if base == cp.SequenceNumber {
		return keptCommit{Base: base, Offset: base, LeaderEpoch: cp.LeaderEpoch}
	}
	return keptCommit{Base: base, Offset: cp.SequenceNumber, LeaderEpoch: cp.LeaderEpoch, MetaSum: metaSum(cp.Metadata)}
}

// encode is the record's checkpoint metadata: the epoch alone for an epoch
// record (what gateways before kept commits wrote and read), else the kept
// form.
func (k keptCommit) encode() string {
	if k.MetaSum == "" {
		return strconv.Itoa(int(k.LeaderEpoch))
	}
	return keptPrefix + "offset=" + strconv.FormatInt(k.Offset, 10) + ";epoch=" + strconv.Itoa(int(k.LeaderEpoch)) +
		";meta=" + k.MetaSum
}

// decodeKept reads a record written at base; ok is false for metadata in
// neither form (then the checkpoint reads as DIS holds it).
func decodeKept(base int64, meta string) (keptCommit, bool) {
	rest, kept := strings.CutPrefix(meta, keptPrefix)
	if !kept {
		e, err := strconv.ParseInt(meta, 10, 32)
		if err != nil {
			return keptCommit{}, false
		}
		return keptCommit{Base: base, Offset: base, LeaderEpoch: int32(e)}, true
	}
	k := keptCommit{Base: base}
	var have int
	for _, field := range strings.Split(rest, ";") {
		key, v, _ := strings.Cut(field, "=")
		var err error
		switch key {
		case "offset":
			k.Offset, err = strconv.ParseInt(v, 10, 64)
		case "epoch":
			var e int64
			e, err = strconv.ParseInt(v, 10, 32)
			k.LeaderEpoch = int32(e)
		case "meta":
			k.MetaSum = v
			if len(v) != 16 {
				return keptCommit{}, false
			}
		default:
			continue // a field of a later version
		}
		if err != nil {
			return keptCommit{}, false
		}
		have++
	}
	return k, have == 3
}

// over applies the rule: cp, the app's checkpoint as DIS holds it (leader
// epoch -1), read as the Kafka commit k stands for while k is current, as
// written otherwise.
func (k keptCommit) over(cp disbackend.Checkpoint) disbackend.Checkpoint {
	if k.Base != cp.SequenceNumber || (k.MetaSum != "" && k.MetaSum != metaSum(cp.Metadata)) {
		return cp
	}
	cp.SequenceNumber, cp.LeaderEpoch = k.Offset, k.LeaderEpoch
	return cp
}

// writeKept writes k as side's checkpoint of the partition (side being,
// for a group's commits, epochApp of its app), which must exist. DIS
// CommitCheckpoint. Errors: DIS's; DIS.4224 (ErrOffsetOutOfRange) when
// k.Base left the partition's range meanwhile.
func (s *Store) writeKept(ctx context.Context, side, stream string, part int32, k keptCommit) error {
	return s.commit(ctx, side, stream, part, k.Base, k.encode())
}

// readKept reads side's records of stream ("" for every stream), by
// partition; a side app that does not exist has none. DIS ShowApp,
// ShowConsumerState, GetCheckpoint.
func (s *Store) readKept(ctx context.Context, side, stream string) (map[partKey]keptCommit, error) {
	cps, err := s.checkpoints(ctx, side, stream)
	if err != nil && !errors.Is(err, disbackend.ErrAppNotFound) {
		return nil, err
	}
	out := make(map[partKey]keptCommit, len(cps))
	for _, cp := range cps {
		if k, ok := decodeKept(cp.SequenceNumber, cp.Metadata); ok {
			out[partKey{cp.Stream, cp.Partition}] = k
		}
	}
	return out, nil
}

// outOfRange reports whether err is DIS refusing a checkpoint's sequence
// number as outside the partition's range.
func outOfRange(err error) bool {
	return codeOf(err) == disapi.CodeSequenceNumberOutOfRange
}

// keepAttempts bounds how often keepCommit reads the range again after DIS
// refused the base it picked (retention moved the log start meanwhile).
const keepAttempts = 3

// keepCommit commits cp, whose offset DIS refused or cannot take (a
// negative one), as the app's checkpoint at the nearest sequence number
// inside the partition's range, with a kept record saying what it stands
// for. The checkpoint is written before the record, so a failure between
// the two leaves the checkpoint reading as itself (or an older record's
// commit if it has that record's base and metadata). sideExists says the
// side app is known to exist. DIS CreateApp, DescribeStream,
// CommitCheckpoint.
//
// key is the group's fence key, asked before each CommitCheckpoint ("" on
// a single node).
func (s *Store) keepCommit(ctx context.Context, app string, cp disbackend.Checkpoint, sideExists bool, key string) error {
	side := epochApp(app)
	if !sideExists {
		if err := s.ensureApp(ctx, side); err != nil {
			return err
		}
	}
	var err error
	for range keepAttempts {
		var r disbackend.PartitionRange
		if r, err = s.describeRange(ctx, cp.Stream, cp.Partition); err != nil {
			return err
		}
		base := min(max(cp.SequenceNumber, r.First), r.Next)
		if err := s.fenced(key); err != nil {
			return fmt.Errorf("disrest: commit %s/%d to app %s: %w", cp.Stream, cp.Partition, app, err)
		}
		err = s.commit(ctx, app, cp.Stream, cp.Partition, base, cp.Metadata)
		if err == nil {
			err = s.writeKept(ctx, side, cp.Stream, cp.Partition, keptFor(cp, base))
		}
		if !outOfRange(err) {
			return err
		}
	}
	return err
}
