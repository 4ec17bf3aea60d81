package disrest

import (
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/disbackend/dislocal"
)

const (
	p1AK, p1SK = "principal-one", "principal-one-secret"
	p2AK, p2SK = "principal-two", "principal-two-secret"
)

// startPrincipalsDIS is startDIS accepting the principals' key pairs
// beside the gateway's, denying principal two the streams "deny-*", and
// keeping the call log.
func startPrincipalsDIS(t *testing.T) (*dislocal.Server, string) {
	t.Helper()
	return startDIS(t, dislocal.Options{Keys: map[string]string{p1AK: p1SK, p2AK: p2SK},
		Deny: map[string][]string{p2AK: {"deny-"}}, CallLog: 1000})
}

func valueBatch(v string) disbackend.Batch {
	r := kmsg.NewRecord()
	r.Value = []byte(v)
	return kafkaBatch([]kmsg.Record{r}, time.Now().UnixMilli())
}

// TestVerifyCredentials: a principal's valid pair passes; a wrong SK or
// an unknown AK is ErrAuthenticationFailed (naming no SK), then refused
// without asking DIS for PrincipalTTL; DIS not
// answering is ErrUnavailable, not ErrAuthenticationFailed.
func TestVerifyCredentials(t *testing.T) {
	t.Parallel()
	d, url := startPrincipalsDIS(t)
	s := newStore(t, url, nil)
	if err := s.VerifyCredentials(ctxT(t), disbackend.Credentials{AK: p1AK, SK: p1SK}); err != nil {
		t.Fatalf("valid pair: %v", err)
	}
	for _, c := range []disbackend.Credentials{{AK: p1AK, SK: "wrong-secret-value"}, {AK: "unknown-ak", SK: p1SK}, {AK: p2AK, SK: p1SK}} {
		err := s.VerifyCredentials(ctxT(t), c)
		if !errors.Is(err, disbackend.ErrAuthenticationFailed) {
			t.Errorf("%v: %v, want ErrAuthenticationFailed", c, err)
		}
		if err != nil && strings.Contains(err.Error(), c.SK) {
			t.Errorf("%v: the error holds the SK: %v", c, err)
		}
	}

	// A refused pair is refused again without asking DIS, for the TTL.
	before := d.Stats().Errors["ListStreams"]
	for i := 0; i < 3; i++ {
		if err := s.VerifyCredentials(ctxT(t), disbackend.Credentials{AK: p1AK, SK: "wrong-secret-value"}); !errors.Is(err, disbackend.ErrAuthenticationFailed) {
			t.Errorf("refused pair again: %v", err)
		}
	}
	if got := d.Stats().Errors["ListStreams"]; got != before {
		t.Errorf("a refused pair asked DIS %d more times", got-before)
	}
	if err := s.VerifyCredentials(ctxT(t), disbackend.Credentials{AK: p1AK, SK: p1SK}); err != nil {
		t.Errorf("the valid pair of an AK whose wrong SK was refused: %v", err)
	}

	down := httptest.NewServer(nil)
	downURL := down.URL
	down.Close()
	s2 := newStore(t, downURL, func(o *Options) { o.RequestTimeout = 2 * time.Second })
	err := s2.VerifyCredentials(ctxT(t), disbackend.Credentials{AK: p1AK, SK: p1SK})
	if err == nil || errors.Is(err, disbackend.ErrAuthenticationFailed) || !errors.Is(err, disbackend.ErrUnavailable) {
		t.Errorf("DIS down: %v, want ErrUnavailable and not ErrAuthenticationFailed", err)
	}
}

// TestAppendWithCredentials: a batch carrying a principal's credentials
// is written by a PutRecords signed with them; batches of two principals
// waiting together in one partition's accumulator go in separate
// PutRecords, each signed by its own; a PutRecords DIS refuses for the
// principal (403) fails its batch with ErrNotAuthorized at once, and not
// the other principal's batch queued beside it.
func TestAppendWithCredentials(t *testing.T) {
	t.Parallel()
	d, url := startPrincipalsDIS(t)
	s := newStore(t, url, func(o *Options) { o.Linger = 200 * time.Millisecond })
	ok := mkStream(t, s, "ok", 1)
	deny := mkStream(t, s, "deny-me", 1)
	c1 := &disbackend.Credentials{AK: p1AK, SK: p1SK}
	c2 := &disbackend.Credentials{AK: p2AK, SK: p2SK}

	var pending []*disbackend.Pending
	for i := 0; i < 6; i++ {
		c, name := c1, "p1"
		if i%2 == 1 {
			c, name = c2, "p2"
		}
		b := valueBatch(fmt.Sprintf("%s-%d", name, i))
		b.Credentials = c
		pending = append(pending, s.Append(ok, 0, b))
	}
	gw := valueBatch("gw-0") // the gateway's own
	pending = append(pending, s.Append(ok, 0, gw))
	for i, p := range pending {
		if _, err := p.Wait(ctxT(t)); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	owner := map[string]string{"p1": p1AK, "p2": p2AK, "gw": testAK}
	n := 0
	for _, c := range d.Calls() {
		if c.Stream != ok {
			continue
		}
		for _, v := range c.Data {
			n++
			if want := owner[string(v[:2])]; c.AccessKey != want {
				t.Errorf("record %q written by a PutRecords of %q, want %q", v, c.AccessKey, want)
			}
		}
	}
	if n != 7 {
		t.Errorf("%d records in PutRecords, want 7", n)
	}

	b2, b1 := valueBatch("p2-denied"), valueBatch("p1-allowed")
	b2.Credentials, b1.Credentials = c2, c1
	denied, allowed := s.Append(deny, 0, b2), s.Append(deny, 0, b1)
	if _, err := denied.Wait(ctxT(t)); !errors.Is(err, disbackend.ErrNotAuthorized) {
		t.Errorf("principal two's batch to %s: %v, want ErrNotAuthorized", deny, err)
	} else if !strings.Contains(err.Error(), p2AK) || strings.Contains(err.Error(), p2SK) {
		t.Errorf("the error should name the AK and not the SK: %v", err)
	}
	if _, err := allowed.Wait(ctxT(t)); err != nil {
		t.Errorf("principal one's batch to %s after principal two's was refused: %v", deny, err)
	}
	if got := d.Stats().AccessKeys[p2AK]["SendRecords"]; got != 4 { // 3 to ok, 1 refused, not retried
		t.Errorf("principal two sent %d PutRecords, want 4", got)
	}
}

// TestReadWithCredentials: a read with a principal's credentials is
// served from the shared caches only after a GetCursor signed with them
// succeeded within PrincipalTTL: a principal DIS denies the stream gets
// ErrNotAuthorized even when the gateway's read cache holds its records;
// a permitted one is checked once per TTL, not per read.
func TestReadWithCredentials(t *testing.T) {
	t.Parallel()
	d, url := startPrincipalsDIS(t)
	s := newStore(t, url, func(o *Options) { o.PrincipalTTL = time.Hour })
	deny := mkStream(t, s, "deny-read", 1)
	if _, err := s.Append(deny, 0, valueBatch("secret")).Wait(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if res, err := s.Read(ctxT(t), deny, 0, 0, 1<<20); err != nil || len(res.Batches) == 0 {
		t.Fatalf("the gateway's read: %v %v", res, err) // fills the read-ahead
	}
	c1 := disbackend.WithCredentials(ctxT(t), &disbackend.Credentials{AK: p1AK, SK: p1SK})
	c2 := disbackend.WithCredentials(ctxT(t), &disbackend.Credentials{AK: p2AK, SK: p2SK})
	for i := 0; i < 3; i++ {
		if res, err := s.Read(c2, deny, 0, 0, 1<<20); !errors.Is(err, disbackend.ErrNotAuthorized) || len(res.Batches) != 0 {
			t.Fatalf("principal two's read %d: %d batches, %v; want ErrNotAuthorized", i, len(res.Batches), err)
		}
		if res, err := s.Read(c1, deny, 0, 0, 1<<20); err != nil || len(res.Batches) == 0 {
			t.Fatalf("principal one's read %d: %v %v", i, res, err)
		}
	}
	st := d.Stats().AccessKeys
	if got := st[p1AK]["ShowCursor"]; got != 1 {
		t.Errorf("principal one's signed GetCursors: %d for 3 reads within the TTL, want 1", got)
	}
	if got := st[p2AK]["ShowCursor"]; got != 3 {
		t.Errorf("principal two's signed GetCursors: %d for 3 refused reads, want 3 (a refusal is not remembered)", got)
	}
	if err := s.AuthorizeStream(c2, deny, disbackend.AccessDescribe); !errors.Is(err, disbackend.ErrNotAuthorized) {
		t.Errorf("principal two's describe: %v, want ErrNotAuthorized", err)
	}
	if err := s.AuthorizeStream(ctxT(t), deny, disbackend.AccessDescribe); err != nil {
		t.Errorf("no credentials in ctx: %v, want nil", err)
	}
}

// TestPrincipalClientCache: the clients of principals' key pairs are
// bounded, least recently used dropped first, and a client is never
// shared by two SKs of one AK.
func TestPrincipalClientCache(t *testing.T) {
	t.Parallel()
	s := newStore(t, "http://127.0.0.1:1", func(o *Options) { o.PrincipalClients = 2 })
	a, b, c := &disbackend.Credentials{AK: "a", SK: "1"}, &disbackend.Credentials{AK: "b", SK: "2"}, &disbackend.Credentials{AK: "c", SK: "3"}
	ca := s.clientOf(a)
	if s.clientOf(a) != ca {
		t.Error("a's client was not reused")
	}
	if s.clientOf(&disbackend.Credentials{AK: "a", SK: "other"}) == ca {
		t.Error("a client used with another SK of its AK")
	}
	s.clientOf(b)
	s.clientOf(a) // a most recent: c's drops b
	s.clientOf(c)
	if n := s.principals.lru.Len(); n != 2 {
		t.Errorf("%d clients kept, want 2", n)
	}
	if s.principals.get(b) != nil || s.principals.get(a) == nil || s.principals.get(c) == nil {
		t.Error("not the least recently used dropped")
	}
	if s.clientOf(nil) != s.c {
		t.Error("no credentials: not the gateway's client")
	}
}
