package disrest

// The registry and the views of cluster mode (docs/cluster.md §2-3).
//
// ClusterStream's partition 0 holds two kinds of record, each a prefix and
// JSON:
//
//	node {"node":1,"client":"node-1-…","gen":7,"listeners":{…},"version":"…","started":…}
//	view {"gen":7,"epoch":12,"id":"…","i":0,"n":1}\n<a piece of the document>
//
// A node appends its registry record after each SyncGroup. The controller
// of generation G (the member assigned partition 0 of ClusterStream) waits
// ClusterSettle, reads the registry records of G, computes the placement
// over the keys it knows and appends the view document (JSON, gzipped, in
// pieces of at most clusterChunkBytes, one record each), then commits
// nodesApp's checkpoint on ClusterStream's partition 0 with generation G:
// sequence number the document's first record, metadata the pointer
// "view G=<G> E=<epoch> n=<records> id=<document id>". DIS takes that
// commit only from a member of G while G is current, and only the
// controller writes it, so there is at most one view per generation.

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"time"

	"github.com/huaweicloud/huaweicloud-sdk-go-v3/services/dis/v2/model"
	"go.uber.org/zap"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/disbackend/disapi"
	"github.com/disgw/disgw/internal/placement"
)

const (
	registryPrefix = "node "
	chunkPrefix    = "view "
	// clusterChunkBytes bounds the document bytes of one record (DIS keeps
	// at most 1 MiB of data per record and per PutRecords on a COMMON
	// stream).
	clusterChunkBytes = 768 << 10
	// maxLoadFactor is the placement's bound: the most loaded node holds at
	// most this times the mean (docs/cluster.md §3).
	maxLoadFactor = 1.1
)

// registryRecord is a node's registry record of one generation.
type registryRecord struct {
	NodeID     int32             `json:"node"`
	ClientID   string            `json:"client"`
	Generation int64             `json:"gen"`
	Listeners  map[string]string `json:"listeners"`
	Version    string            `json:"version,omitempty"`
	// Started is when the node started (Unix ms): of two members with
	// one node id, the one started first holds it.
	Started int64 `json:"started"`
}

// viewDoc is the view document of a generation.
type viewDoc struct {
	Generation int64 `json:"gen"`
	Epoch      int32 `json:"epoch"`
	// Controller is the controller's node id.
	Controller int32 `json:"controller"`
	// Members are the registry records of the generation's members the
	// controller read, by client id; two may share a node id (holders).
	Members []registryRecord `json:"members"`
	// Owners lists the keys each node owns, by node id (decimal). A key
	// not listed is owned by the rendezvous hash over the nodes.
	Owners map[string][]string `json:"owners"`
}

// chunkHeader heads a record of a view document.
type chunkHeader struct {
	Generation int64  `json:"gen"`
	Epoch      int32  `json:"epoch"`
	ID         string `json:"id"`
	Index      int    `json:"i"`
	Count      int    `json:"n"`
}

// pointer is the metadata of the view pointer.
type pointer struct {
	gen   int64
	epoch int32
	n     int
	id    string
}

func (p pointer) String() string {
	return fmt.Sprintf("view G=%d E=%d n=%d id=%s", p.gen, p.epoch, p.n, p.id)
}

func parsePointer(meta string) (pointer, bool) {
	var p pointer
	if _, err := fmt.Sscanf(meta, "view G=%d E=%d n=%d id=%s", &p.gen, &p.epoch, &p.n, &p.id); err != nil || p.n <= 0 {
		return pointer{}, false
	}
	return p, true
}

// member returns the member with clientID, nil when there is none.
func (d *viewDoc) member(clientID string) *registryRecord {
	for i := range d.Members {
		if d.Members[i].ClientID == clientID {
			return &d.Members[i]
		}
	}
	return nil
}

// holders returns, by node id, the member that holds it: the one started
// first (then the least client id) among those with that id.
func holdersOf(members []registryRecord) map[int32]registryRecord {
	out := map[int32]registryRecord{}
	for _, r := range members {
		h, ok := out[r.NodeID]
		if !ok || r.Started < h.Started || (r.Started == h.Started && r.ClientID < h.ClientID) {
			out[r.NodeID] = r
		}
	}
	return out
}

func (d *viewDoc) holders() map[int32]registryRecord { return holdersOf(d.Members) }

// ownerMap returns the owner of each key the document lists.
func (d *viewDoc) ownerMap() map[string]int32 {
	out := make(map[string]int32, d.keys())
	for id, keys := range d.Owners {
		n, err := strconv.ParseInt(id, 10, 32)
		if err != nil {
			continue
		}
		for _, k := range keys {
			out[k] = int32(n)
		}
	}
	return out
}

// keys counts the keys the document places.
func (d *viewDoc) keys() int {
	n := 0
	for _, keys := range d.Owners {
		n += len(keys)
	}
	return n
}

// encodeDoc is the document gzipped JSON, in pieces of at most
// clusterChunkBytes.
func encodeDoc(d *viewDoc) ([][]byte, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if err := json.NewEncoder(zw).Encode(d); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	var out [][]byte
	for len(b) > 0 {
		n := min(len(b), clusterChunkBytes)
		out = append(out, b[:n])
		b = b[n:]
	}
	return out, nil
}

func decodeDoc(pieces [][]byte) (*viewDoc, error) {
	zr, err := gzip.NewReader(io.MultiReader(func() []io.Reader {
		rs := make([]io.Reader, len(pieces))
		for i, p := range pieces {
			rs[i] = bytes.NewReader(p)
		}
		return rs
	}()...))
	if err != nil {
		return nil, err
	}
	var d viewDoc
	if err := json.NewDecoder(zr).Decode(&d); err != nil {
		return nil, err
	}
	return &d, nil
}

// register appends this node's registry record of gen.
func (m *membership) register(ctx context.Context, gen int64) error {
	rec, err := json.Marshal(m.self(gen))
	if err != nil {
		return err
	}
	_, err = m.putCluster(ctx, append([]byte(registryPrefix), rec...))
	return err
}

// self is this node's registry record of gen.
func (m *membership) self(gen int64) registryRecord {
	return registryRecord{NodeID: m.nodeID, ClientID: m.clientID, Generation: gen, Listeners: m.listeners,
		Version: m.s.opts.Version, Started: m.started}
}

// control is the controller's task of generation gen (whose records lie
// at or after floor): after ClusterSettle it writes the view, then checks
// every ClusterRebalanceInterval whether keys created since unbalance it
// (then the node joins again, starting a new generation). It ends with
// the generation.
func (m *membership) control(ctx context.Context, gen, floor int64) {
	defer m.wg.Done()
	m.log.Info("controller of the generation: writing its view after the settle time", zap.Int64("generation", gen),
		zap.Duration("settle", m.settle))
	if !sleep(ctx, m.settle) {
		return
	}
	for {
		if !m.pause.wait(ctx) {
			return
		}
		err := m.writeView(ctx, gen, floor)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return
		}
		if fenceRefused(err) {
			m.log.Info("cluster view not written: the generation ended", zap.Int64("generation", gen), zap.Error(err))
			return
		}
		m.log.Warn("writing the cluster view failed: retrying", zap.Int64("generation", gen), zap.Error(err))
		if !sleep(ctx, m.heartbeat) {
			return
		}
	}
	signal(m.poke)
	t := time.NewTicker(m.rebalance)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !m.pause.wait(ctx) {
			return
		}
		if m.unbalanced(ctx, gen) {
			signal(m.rejoin)
			return
		}
	}
}

// writeView writes the view of gen: the epoch after the current
// pointer's, the members from the registry records of gen, the placement
// of every key known, the document, then the fenced pointer. DIS
// GetCheckpoint, GetCursor, GetRecords, ListStreams, ListApps, PutRecords,
// CommitCheckpoint.
func (m *membership) writeView(ctx context.Context, gen, floor int64) error {
	sn, meta, err := m.pointer(ctx)
	if err != nil {
		return err
	}
	epoch := int32(1)
	if p, ok := parsePointer(meta); ok && sn >= 0 {
		epoch = p.epoch + 1
	}
	members, err := m.registry(ctx, gen, floor)
	if err != nil {
		return err
	}
	if doc := (&viewDoc{Members: members}); doc.member(m.clientID) == nil {
		members = append(members, m.self(gen))
	}
	keys, err := m.placementKeys(ctx)
	if err != nil {
		return err
	}
	doc := placeKeys(gen, epoch, m.nodeID, members, keys)
	pieces, err := encodeDoc(doc)
	if err != nil {
		return err
	}
	p := pointer{gen: gen, epoch: epoch, n: len(pieces), id: randomHex(8)}
	first := int64(-1)
	for i, piece := range pieces {
		h, _ := json.Marshal(chunkHeader{Generation: gen, Epoch: epoch, ID: p.id, Index: i, Count: len(pieces)})
		data := make([]byte, 0, len(chunkPrefix)+len(h)+1+len(piece))
		data = append(append(append(append(data, chunkPrefix...), h...), '\n'), piece...)
		sns, err := m.putCluster(ctx, data)
		if err != nil {
			return err
		}
		if i == 0 {
			first = sns[0]
		}
	}
	if err := m.s.commitFenced(ctx, nodesApp, ClusterStream, 0, first, p.String(), m.clientID, gen); err != nil {
		return err
	}
	m.log.Info("cluster view written", zap.Int64("generation", gen), zap.Int32("epoch", epoch),
		zap.Int("members", len(members)), zap.Int("keys", len(keys)), zap.Int("records", len(pieces)), zap.Int64("sequence_number", first))
	return nil
}

// pointer reads the view pointer: nodesApp's checkpoint on
// ClusterStream's partition 0, sequence number -1 when there is none
// (DIS.4375 too: the app never committed on the stream). DIS
// GetCheckpoint.
func (m *membership) pointer(ctx context.Context) (int64, string, error) {
	sn, meta, err := m.s.checkpointOf(ctx, nodesApp, ClusterStream, 0)
	if codeOf(err) == disapi.CodeNoCheckpoint {
		return -1, "", nil
	}
	return sn, meta, err
}

// placeKeys is the view document of gen: the holders of the members'
// node ids own the keys as internal/placement assigns them.
func placeKeys(gen int64, epoch int32, controller int32, members []registryRecord, keys []string) *viewDoc {
	sort.Slice(members, func(i, j int) bool { return members[i].ClientID < members[j].ClientID })
	holders := holdersOf(members)
	ids := make([]int32, 0, len(holders))
	for id := range holders {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	doc := &viewDoc{Generation: gen, Epoch: epoch, Controller: controller, Members: members, Owners: map[string][]string{}}
	for i, o := range placement.Assign(ids, keys) {
		if o != placement.NoOwner {
			id := strconv.Itoa(int(o))
			doc.Owners[id] = append(doc.Owners[id], keys[i])
		}
	}
	return doc
}

// registry returns the registry records of gen, one per client id, read
// from floor on.
func (m *membership) registry(ctx context.Context, gen, floor int64) ([]registryRecord, error) {
	seen := map[string]bool{}
	var out []registryRecord
	err := m.scanCluster(ctx, floor, func(_ int64, data []byte) bool {
		rest, ok := bytes.CutPrefix(data, []byte(registryPrefix))
		if !ok {
			return true
		}
		var r registryRecord
		if json.Unmarshal(rest, &r) != nil || r.Generation != gen || r.ClientID == "" || seen[r.ClientID] {
			return true
		}
		seen[r.ClientID] = true
		out = append(out, r)
		return true
	})
	return out, err
}

// readDoc reads the view document p points at, from sequence number sn.
func (m *membership) readDoc(ctx context.Context, sn int64, p pointer) (*viewDoc, error) {
	pieces := make([][]byte, p.n)
	found := 0
	err := m.scanCluster(ctx, sn, func(_ int64, data []byte) bool {
		rest, ok := bytes.CutPrefix(data, []byte(chunkPrefix))
		if !ok {
			return true
		}
		head, piece, ok := bytes.Cut(rest, []byte{'\n'})
		var h chunkHeader
		if !ok || json.Unmarshal(head, &h) != nil || h.ID != p.id || h.Index < 0 || h.Index >= p.n || pieces[h.Index] != nil {
			return true
		}
		pieces[h.Index] = piece
		found++
		return found < p.n
	})
	if err != nil {
		return nil, err
	}
	if found < p.n {
		return nil, fmt.Errorf("cluster view %s: %d of its %d records found in %s", p, found, p.n, ClusterStream)
	}
	doc, err := decodeDoc(pieces)
	if err != nil {
		return nil, fmt.Errorf("cluster view %s: %w", p, err)
	}
	if doc.Generation != p.gen || doc.Epoch != p.epoch {
		return nil, fmt.Errorf("cluster view %s: the document is of generation %d, epoch %d", p, doc.Generation, doc.Epoch)
	}
	return doc, nil
}

// putCluster appends one record to ClusterStream's partition 0 and
// returns its sequence number in a slice. Sent again after DIS.5xxx,
// DIS.4303/4305/4309 or no answer (callIdempotent): a record written
// twice reads once (readers keep the first of a client id, or of a piece).
// It is not fenced: every node writes there.
func (m *membership) putCluster(ctx context.Context, data []byte) ([]int64, error) {
	recs := []disRecord{{data: data, ts: time.Now().UnixMilli()}}
	body := putRecordsBody(ClusterStream, 0, recs, []int{0})
	resp, err := callIdempotent(ctx, m.s, "put records "+ClusterStream, func() (*model.SendRecordsResponse, error) {
		v, err := m.s.c.HcClient.Sync(&putRequest{Body: body}, putRecordsDef())
		if err != nil {
			return nil, err
		}
		return v.(*model.SendRecordsResponse), nil
	})
	if err != nil {
		return nil, err
	}
	if resp.Records == nil || len(*resp.Records) != 1 {
		return nil, fmt.Errorf("put records to %s: %d results for 1 record", ClusterStream, lenOf(resp.Records))
	}
	e := (*resp.Records)[0]
	if e.ErrorCode != nil && *e.ErrorCode != "" {
		return nil, fmt.Errorf("put records to %s: %w", ClusterStream, refusal(e))
	}
	if e.SequenceNumber == nil {
		return nil, fmt.Errorf("put records to %s: no sequence number", ClusterStream)
	}
	sn, err := strconv.ParseInt(*e.SequenceNumber, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("put records to %s: sequence number %q", ClusterStream, *e.SequenceNumber)
	}
	return []int64{sn}, nil
}

// scanCluster hands fn the records of ClusterStream's partition 0 from
// sequence number from (or the first one kept) up to the partition's
// next one when called, in order, until fn returns false. DIS
// DescribeStream, GetCursor, GetRecords.
func (m *membership) scanCluster(ctx context.Context, from int64, fn func(sn int64, data []byte) bool) error {
	k := partKey{ClusterStream, 0}
	r, err := m.s.describeRange(ctx, ClusterStream, 0)
	if err != nil {
		return err
	}
	from = max(from, r.First)
	if from >= r.Next {
		return nil
	}
	cur, err := m.s.cursor(ctx, k, model.GetShowCursorRequestCursorTypeEnum().AT_SEQUENCE_NUMBER, from, -1)
	if err != nil {
		return err
	}
	mb := int32(readAheadBytes)
	for empty := 0; from < r.Next; {
		resp, err := callIdempotent(ctx, m.s, "get records "+ClusterStream, func() (*model.ConsumeRecordsResponse, error) {
			return m.s.c.ConsumeRecords(&model.ConsumeRecordsRequest{PartitionCursor: cur, MaxFetchBytes: &mb})
		})
		if err != nil {
			return err
		}
		if resp.Records == nil || len(*resp.Records) == 0 {
			if empty++; empty >= 3 {
				return fmt.Errorf("get records of %s at %d: no records below %d", ClusterStream, from, r.Next)
			}
		}
		for _, rec := range *resp.Records {
			if rec.SequenceNumber == nil {
				continue
			}
			sn, err := strconv.ParseInt(*rec.SequenceNumber, 10, 64)
			if err != nil || sn >= r.Next {
				return nil
			}
			from = sn + 1
			var data []byte
			if rec.Data != nil {
				if data, err = base64.StdEncoding.DecodeString(*rec.Data); err != nil {
					continue
				}
			}
			if !fn(sn, data) {
				return nil
			}
		}
		if resp.NextPartitionCursor == nil {
			return nil
		}
		cur = *resp.NextPartitionCursor
	}
	return nil
}

// placementKeys are the keys the controller places (docs/cluster.md §3):
// every readable partition of every stream (the gateway's
// GroupStream and SnapshotStream too), every group with an app, sorted.
// DIS ListStreams, DescribeStream, ListApps.
func (m *membership) placementKeys(ctx context.Context) ([]string, error) {
	streams, err := m.s.ListStreams(ctx)
	if err != nil {
		return nil, err
	}
	for _, name := range []string{GroupStream, SnapshotStream} {
		st, err := m.s.DescribeStream(ctx, name)
		if errors.Is(err, disbackend.ErrStreamNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		streams = append(streams, st)
	}
	var keys []string
	for _, st := range streams {
		for p := int32(0); p < st.PartitionCount; p++ {
			keys = append(keys, disbackend.PartitionKey(st.Name, p))
		}
	}
	apps, err := m.s.ListApps(ctx)
	if err != nil {
		return nil, err
	}
	for _, a := range apps {
		keys = append(keys, disbackend.GroupKey(a.GroupID))
	}
	sort.Strings(keys)
	out := keys[:0]
	for i, k := range keys {
		if i == 0 || k != keys[i-1] {
			out = append(out, k)
		}
	}
	return out, nil
}

// unbalanced reports whether keys created since the view of gen (owned by
// the rendezvous hash) load a node above maxLoadFactor times the mean.
func (m *membership) unbalanced(ctx context.Context, gen int64) bool {
	st := m.cur.Load()
	v := st.view
	if !v.Ready || v.Generation != gen || st.doc == nil || len(v.Nodes) < 2 {
		return false
	}
	keys, err := m.placementKeys(ctx)
	if err != nil {
		m.log.Warn("cluster: listing the keys to check the balance failed", zap.Error(err))
		return false
	}
	placed := st.doc.ownerMap()
	load := map[int32]int{}
	fresh := 0
	for _, k := range keys {
		if _, ok := placed[k]; !ok {
			fresh++
		}
		load[v.Owner(k)]++
	}
	most := 0
	for _, n := range load {
		most = max(most, n)
	}
	mean := float64(len(keys)) / float64(len(v.Nodes))
	if fresh == 0 || float64(most) <= maxLoadFactor*mean {
		return false
	}
	m.log.Info("cluster: keys created since the view unbalance it", zap.Int("keys", len(keys)), zap.Int("new_keys", fresh),
		zap.Int("most_loaded", most), zap.Float64("mean", mean))
	return true
}
