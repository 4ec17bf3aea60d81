package disrest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/disbackend/disapi"
)

// The ACL bindings (disbackend.ACLStore) are kept in DIS, so every gateway
// node shares them and a restart finds them: as the checkpoint metadata of
// the gateway-owned apps aclAppPrefix+"0", +"1", ... on MetaStream's
// partition 0 (at sequence number 0). DIS keeps at most 1000 characters of
// metadata per checkpoint, so the encoded set is cut into chunks, one per
// app. Each chunk begins "g=<generation>;n=<chunks>;": a write puts a new
// generation in every chunk, chunk 0 last, and a reader that finds chunks
// of different generations (a write under way) reads again. The encoding
// is one binding per '|'-separated item, "rt,pt,op,perm,name,principal,host"
// with the strings query-escaped.

// aclAppPrefix begins the names of the apps holding the ACLs. No group
// app begins with "__" (AppNameForGroup escapes '_').
const aclAppPrefix = "__disgw-acls-"

// maxACLChunks bounds the apps (and so the bytes) the ACLs may take.
const maxACLChunks = 64

// aclChunkPayload is the encoded bytes per chunk, leaving room for the
// header within DIS's metadata limit.
const aclChunkPayload = disapi.MaxCheckpointMetadataLen - 40

var _ disbackend.ACLStore = (*Store)(nil)

// aclMu serialises this process's ACL updates.
var aclMu sync.Mutex

func aclApp(i int) string { return aclAppPrefix + strconv.Itoa(i) }

// encodeACLs is the text the chunks hold.
func encodeACLs(acls []disbackend.ACL) string {
	items := make([]string, len(acls))
	for i, a := range acls {
		items[i] = strings.Join([]string{
			strconv.Itoa(int(a.ResourceType)), strconv.Itoa(int(a.PatternType)),
			strconv.Itoa(int(a.Operation)), strconv.Itoa(int(a.Permission)),
			url.QueryEscape(a.ResourceName), url.QueryEscape(a.Principal), url.QueryEscape(a.Host)}, ",")
	}
	return strings.Join(items, "|")
}

// decodeACLs reads encodeACLs's text. Errors: a malformed item.
func decodeACLs(s string) ([]disbackend.ACL, error) {
	if s == "" {
		return nil, nil
	}
	var out []disbackend.ACL
	for _, item := range strings.Split(s, "|") {
		f := strings.Split(item, ",")
		if len(f) != 7 {
			return nil, fmt.Errorf("disrest: acls: malformed item %q", item)
		}
		var codes [4]int8
		for i := range codes {
			n, err := strconv.ParseInt(f[i], 10, 8)
			if err != nil {
				return nil, fmt.Errorf("disrest: acls: malformed item %q", item)
			}
			codes[i] = int8(n)
		}
		var strs [3]string
		for i := range strs {
			v, err := url.QueryUnescape(f[4+i])
			if err != nil {
				return nil, fmt.Errorf("disrest: acls: malformed item %q", item)
			}
			strs[i] = v
		}
		out = append(out, disbackend.ACL{ResourceType: codes[0], PatternType: codes[1], Operation: codes[2], Permission: codes[3],
			ResourceName: strs[0], Principal: strs[1], Host: strs[2]})
	}
	return out, nil
}

// parseACLChunk splits a chunk into its generation, chunk count and payload.
func parseACLChunk(meta string) (gen string, n int, payload string, ok bool) {
	g, rest, ok1 := strings.Cut(meta, ";")
	c, payload, ok2 := strings.Cut(rest, ";")
	gen, okg := strings.CutPrefix(g, "g=")
	cs, okc := strings.CutPrefix(c, "n=")
	if !ok1 || !ok2 || !okg || !okc {
		return "", 0, "", false
	}
	n, err := strconv.Atoi(cs)
	if err != nil || n < 1 || n > maxACLChunks {
		return "", 0, "", false
	}
	return gen, n, payload, true
}

// errACLTorn: the chunks read belong to different writes.
var errACLTorn = errors.New("disrest: acls: chunks of different writes (a write is under way)")

// ACLs reads the chunks; none means no ACLs. A read that meets a write
// under way is tried again. DIS GetCheckpoint.
func (s *Store) ACLs(ctx context.Context) ([]disbackend.ACL, error) {
	var err error
	for range 5 {
		var acls []disbackend.ACL
		acls, err = s.readACLs(ctx)
		if !errors.Is(err, errACLTorn) {
			return acls, err
		}
	}
	return nil, err
}

func (s *Store) readACLs(ctx context.Context) ([]disbackend.ACL, error) {
	sn, meta, err := s.checkpointOf(ctx, aclApp(0), MetaStream, 0)
	if errors.Is(err, disbackend.ErrAppNotFound) || errors.Is(err, disbackend.ErrStreamNotFound) || err == nil && sn < 0 {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("disrest: acls: %w", err)
	}
	gen, n, payload, ok := parseACLChunk(meta)
	if !ok {
		return nil, fmt.Errorf("disrest: acls: unreadable chunk 0 %q", meta)
	}
	var b strings.Builder
	b.WriteString(payload)
	for i := 1; i < n; i++ {
		_, meta, err := s.checkpointOf(ctx, aclApp(i), MetaStream, 0)
		if errors.Is(err, disbackend.ErrAppNotFound) {
			return nil, errACLTorn
		}
		if err != nil {
			return nil, fmt.Errorf("disrest: acls: %w", err)
		}
		g, _, p, ok := parseACLChunk(meta)
		if !ok || g != gen {
			return nil, errACLTorn
		}
		b.WriteString(p)
	}
	return decodeACLs(b.String())
}

// UpdateACLs reads the ACLs, applies update and writes the result: chunks
// 1.. first, chunk 0 last. Errors: update's; ErrInvalidConfig when the
// encoded ACLs need more than maxACLChunks apps; ErrNotController (cluster
// mode: only the controller writes them); DIS's. DIS CreateApp,
// CommitCheckpoint.
func (s *Store) UpdateACLs(ctx context.Context, update func([]disbackend.ACL) ([]disbackend.ACL, error)) error {
	if err := s.controllerWrite("update ACLs"); err != nil {
		return err
	}
	aclMu.Lock()
	defer aclMu.Unlock()
	cur, err := s.ACLs(ctx)
	if err != nil {
		return err
	}
	next, err := update(cur)
	if err != nil {
		return err
	}
	text := encodeACLs(next)
	var chunks []string
	for len(text) > aclChunkPayload {
		// The reader concatenates the payloads before decoding.
		chunks = append(chunks, text[:aclChunkPayload])
		text = text[aclChunkPayload:]
	}
	chunks = append(chunks, text)
	if len(chunks) > maxACLChunks {
		return fmt.Errorf("disrest: acls: %d ACLs take more than the %d checkpoints of %d characters kept for them: %w",
			len(next), maxACLChunks, disapi.MaxCheckpointMetadataLen, disbackend.ErrInvalidConfig)
	}
	var g [4]byte
	_, _ = rand.Read(g[:])
	head := "g=" + hex.EncodeToString(g[:]) + ";n=" + strconv.Itoa(len(chunks)) + ";"
	if err := s.ensureMeta(ctx); err != nil {
		return err
	}
	for i := len(chunks) - 1; i >= 0; i-- {
		if err := s.ensureApp(ctx, aclApp(i)); err != nil {
			return err
		}
		if err := s.controllerWrite("update ACLs"); err != nil {
			return err
		}
		if err := s.commit(ctx, aclApp(i), MetaStream, 0, 0, head+chunks[i]); err != nil {
			return fmt.Errorf("disrest: keep acls: %w", err)
		}
	}
	return nil
}
