package disrest

// Principals' own credentials: the gateway's `dis` authentication mode,
// where SASL PLAIN's username and password are a DIS AK and SK and DIS's
// IAM decides what each connection may do.
//
//   - VerifyCredentials signs one ListStreams (limit 1) with them at
//     SaslAuthenticate; a pair DIS refused is refused without asking for
//     PrincipalTTL.
//   - A call made with a ctx carrying disbackend.Credentials (CreateStream,
//     DeleteStream, DescribeStream, UpdatePartitionCount,
//     UpdateStreamConfig), and the PutRecords of a Batch carrying them, is
//     signed with them through an SDK client of their own, kept in a
//     bounded LRU cache keyed by the key pair (PrincipalClients, 1024).
//     The accumulator never puts two principals' records in one
//     PutRecords.
//   - Reads are served from the Store's shared read-ahead and cursor
//     caches, filled with the gateway's credentials, only for a principal
//     whose AK was checked for that stream with a GetCursor signed with
//     its own credentials within PrincipalTTL (60 s); AuthorizeStream
//     makes that check (and, for Metadata, a DescribeStream).
//   - Everything else is gateway-internal state and keeps the gateway's
//     credentials: the idempotence, ACL, SCRAM, group and ext-config
//     checkpoints, consumer-group apps, ListStreams of the topic refresh.

import (
	"container/list"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/huaweicloud/huaweicloud-sdk-go-v3/core"
	dis "github.com/huaweicloud/huaweicloud-sdk-go-v3/services/dis/v2"
	"github.com/huaweicloud/huaweicloud-sdk-go-v3/services/dis/v2/model"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/disbackend/disapi"
)

var _ disbackend.CredentialVerifier = (*Store)(nil)

const (
	defaultPrincipalClients = 1024
	defaultPrincipalTTL     = 60 * time.Second
	// maxStreamChecks bounds the remembered (AK, stream, access) checks.
	maxStreamChecks = 16384
)

// principalCache holds the SDK clients of principals' credentials (LRU,
// at most max) and their recent successful stream checks (at most
// maxStreamChecks, each valid for ttl). Safe for concurrent use.
type principalCache struct {
	max int
	ttl time.Duration

	// mu guards lru, clients and checks.
	mu      sync.Mutex
	lru     *list.List               // of *principalClient, most recent first
	clients map[string]*list.Element // by clientKey
	checks  map[streamCheck]time.Time
	// refused are key pairs DIS refused (by refusedKey), when: refused
	// again without asking DIS for ttl, so that a client retrying a wrong
	// password does not make the gateway's address look like an attack
	// to DIS (DIS.4309 black-lists an IP after many failed requests).
	refused map[string]time.Time
}

type principalClient struct {
	key string
	c   *dis.DisClient
}

// streamCheck is one successful check: access is accessRead or
// accessDescribe.
type streamCheck struct {
	ak, stream string
	access     disbackend.StreamAccess
}

func (p *principalCache) init(max int, ttl time.Duration) {
	if max <= 0 {
		max = defaultPrincipalClients
	}
	if ttl <= 0 {
		ttl = defaultPrincipalTTL
	}
	p.max, p.ttl = max, ttl
	p.lru = list.New()
	p.clients = map[string]*list.Element{}
	p.checks = map[streamCheck]time.Time{}
	p.refused = map[string]time.Time{}
}

// refusedKey is the key of a refused pair: the AK and a hash of the SK.
func refusedKey(c disbackend.Credentials) string {
	sum := sha256.Sum256([]byte(c.SK))
	return c.AK + "\x00" + string(sum[:])
}

func (p *principalCache) wasRefused(c disbackend.Credentials, now time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return fresh(p.refused, refusedKey(c), now, p.ttl)
}

func (p *principalCache) refuse(c disbackend.Credentials, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	stamp(p.refused, refusedKey(c), now, p.ttl)
}

// fresh reports whether m holds k stamped less than ttl before now.
func fresh[K comparable](m map[K]time.Time, k K, now time.Time, ttl time.Duration) bool {
	at, ok := m[k]
	return ok && now.Sub(at) < ttl
}

// stamp sets m[k] to now, keeping m within maxStreamChecks entries: when
// full it first drops the entries ttl old, and all of them if none is (all
// fresh: ask DIS again rather than grow).
func stamp[K comparable](m map[K]time.Time, k K, now time.Time, ttl time.Duration) {
	if len(m) >= maxStreamChecks {
		for ck, at := range m {
			if now.Sub(at) >= ttl {
				delete(m, ck)
			}
		}
		if len(m) >= maxStreamChecks {
			clear(m)
		}
	}
	m[k] = now
}

// clientKey is the cache key of a key pair: both halves, so that a
// client is never used with an SK other than its own.
func clientKey(c *disbackend.Credentials) string { return c.AK + "\x00" + c.SK }

func (p *principalCache) get(c *disbackend.Credentials) *dis.DisClient {
	p.mu.Lock()
	defer p.mu.Unlock()
	e := p.clients[clientKey(c)]
	if e == nil {
		return nil
	}
	p.lru.MoveToFront(e)
	return e.Value.(*principalClient).c
}

func (p *principalCache) put(c *disbackend.Credentials, cl *dis.DisClient) {
	k := clientKey(c)
	p.mu.Lock()
	defer p.mu.Unlock()
	if e := p.clients[k]; e != nil {
		p.lru.MoveToFront(e)
		return
	}
	p.clients[k] = p.lru.PushFront(&principalClient{key: k, c: cl})
	for p.lru.Len() > p.max {
		old := p.lru.Remove(p.lru.Back()).(*principalClient)
		delete(p.clients, old.key)
	}
}

func (p *principalCache) checked(k streamCheck, now time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return fresh(p.checks, k, now, p.ttl)
}

func (p *principalCache) remember(k streamCheck, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	stamp(p.checks, k, now, p.ttl)
}

// forget drops the checks of stream (deleted, or a check that failed).
func (p *principalCache) forget(k streamCheck) {
	p.mu.Lock()
	delete(p.checks, k)
	p.mu.Unlock()
}

// cl returns the client of the credentials in ctx, or the gateway's when
// it carries none.
func (s *Store) cl(ctx context.Context) *dis.DisClient {
	return s.clientOf(disbackend.CredentialsFrom(ctx))
}

// clientOf returns the client of c (nil: the gateway's), building and
// caching it on first use.
func (s *Store) clientOf(c *disbackend.Credentials) *dis.DisClient {
	if c == nil {
		return s.c
	}
	if cl := s.principals.get(c); cl != nil {
		return cl
	}
	cl, err := newClient(s.opts, c.AK, c.SK, "")
	if err != nil {
		// The options were checked by New; only the AK/SK can be
		// wrong here, and DIS will refuse it as it is.
		cl = s.c
	}
	s.principals.put(c, cl)
	return cl
}

// hcOf is hc for the credentials c (nil: the gateway's).
func (s *Store) hcOf(c *disbackend.Credentials) *core.HcHttpClient { return s.clientOf(c).HcClient }

// VerifyCredentials checks a principal's AK/SK with a ListStreams (limit
// 1) signed with them. DIS refusing the signature or the AK (HTTP 441
// DIS.4100-DIS.4115, DIS.4117) is ErrAuthenticationFailed, and the pair
// is then refused without asking DIS for PrincipalTTL; DIS.4116 (403:
// IAM does not let the principal list streams) is a success, the key pair
// being valid; no answer, DIS.5xxx or the request-rate codes after the
// retries are ErrUnavailable. Errors never hold the SK.
func (s *Store) VerifyCredentials(ctx context.Context, c disbackend.Credentials) error {
	if c.AK == "" || c.SK == "" {
		return fmt.Errorf("disrest: verify credentials: %w: empty AK or SK", disbackend.ErrAuthenticationFailed)
	}
	if s.principals.wasRefused(c, time.Now()) {
		return fmt.Errorf("disrest: verify credentials of %s: %w: DIS refused this key pair less than %v ago", c.AK, disbackend.ErrAuthenticationFailed, s.principals.ttl)
	}
	cl, err := newClient(s.opts, c.AK, c.SK, "")
	if err != nil {
		return fmt.Errorf("disrest: verify credentials of %s: %w: %v", c.AK, disbackend.ErrAuthenticationFailed, err)
	}
	limit := int32(1)
	_, err = callIdempotent(disbackend.WithCredentials(ctx, &c), s, "list streams (verify credentials)", func() (*model.ListStreamsResponse, error) {
		return cl.ListStreams(&model.ListStreamsRequest{Limit: &limit})
	})
	code := codeOf(err)
	switch {
	case err == nil, code == disapi.CodeForbidden:
		s.principals.put(&c, cl)
		return nil
	case strings.HasPrefix(code, disapi.CodePrefixAuth):
		s.principals.refuse(c, time.Now())
		return fmt.Errorf("disrest: verify credentials of %s: %w: %w", c.AK, disbackend.ErrAuthenticationFailed, err)
	case errors.Is(err, disbackend.ErrUnavailable), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("disrest: verify credentials of %s: DIS could not be asked: %w", c.AK, err)
	}
	return err
}

// AuthorizeStream checks that the credentials in ctx may access stream:
// for disbackend.AccessRead with a GetCursor (LATEST, partition 0), for
// AccessDescribe with a DescribeStream (one partition), signed with them,
// unless the same check succeeded within PrincipalTTL. nil when ctx
// carries no credentials. Errors: ErrNotAuthorized (DIS.4116),
// ErrAuthenticationFailed (DIS refusing the credentials since they were
// verified: a deleted or disabled key), ErrStreamNotFound, ErrUnavailable.
func (s *Store) AuthorizeStream(ctx context.Context, stream string, access disbackend.StreamAccess) error {
	c := disbackend.CredentialsFrom(ctx)
	if c == nil {
		return nil
	}
	k := streamCheck{ak: c.AK, stream: stream, access: access}
	if s.principals.checked(k, time.Now()) {
		return nil
	}
	cl := s.clientOf(c)
	var err error // ctx carries c: its errors name c.AK
	if access == disbackend.AccessRead {
		typ := model.GetShowCursorRequestCursorTypeEnum().LATEST
		req := &model.ShowCursorRequest{StreamName: stream, PartitionId: disbackend.PartitionID(0), CursorType: &typ}
		_, err = callIdempotent(ctx, s, "get cursor (authorize "+c.AK+")", func() (*model.ShowCursorResponse, error) { return cl.ShowCursor(req) })
	} else {
		limit := int32(1)
		req := &model.ShowStreamRequest{StreamName: stream, LimitPartitions: &limit}
		_, err = callIdempotent(ctx, s, "describe stream (authorize "+c.AK+")", func() (*model.ShowStreamResponse, error) { return cl.ShowStream(req) })
	}
	if err != nil {
		s.principals.forget(k)
		if code := codeOf(err); strings.HasPrefix(code, disapi.CodePrefixAuth) && !errors.Is(err, disbackend.ErrNotAuthorized) {
			// Credentials refused since authentication (a deleted AK):
			// not this stream's fault, but not to be served either; the
			// gateway closes the connection (ErrAuthenticationFailed).
			return fmt.Errorf("disrest: authorize %s on %s: %w", c.AK, stream, err)
		}
		return fmt.Errorf("disrest: authorize %s on %s: %w", c.AK, stream, err)
	}
	s.principals.remember(k, time.Now())
	return nil
}
