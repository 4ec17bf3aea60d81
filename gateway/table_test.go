package gateway

import (
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/disgw/disgw/disbackend"
)

// cappedBelowKmsg lists API keys we serve below the newest version kmsg
// knows, with the reason. Empty: we serve every API at its newest version.
var cappedBelowKmsg = map[int16]string{}

// TestAPITableAgainstKmsg: every row's max is kmsg's MaxVersion unless
// listed with a reason, min <= max, and versions that name topics by id
// (Produce v13, Fetch v13+) come only with Metadata v10+ (topic ids).
func TestAPITableAgainstKmsg(t *testing.T) {
	for _, e := range apiTable {
		if e == nil {
			continue
		}
		req := kmsg.RequestForKey(e.key)
		if req == nil {
			t.Fatalf("%s: kmsg does not know key %d", e.name, e.key)
		}
		if e.min > e.max || e.min < 0 {
			t.Errorf("%s: min %d max %d", e.name, e.min, e.max)
		}
		if e.max > req.MaxVersion() {
			t.Errorf("%s: max %d above kmsg's %d", e.name, e.max, req.MaxVersion())
		}
		if _, capped := cappedBelowKmsg[e.key]; e.max < req.MaxVersion() && !capped {
			t.Errorf("%s: max %d below kmsg's %d without a reason in cappedBelowKmsg", e.name, e.max, req.MaxVersion())
		}
	}
	if p, f, m := lookupAPI(0), lookupAPI(1), lookupAPI(3); p.max >= 13 || f.max >= 13 {
		if m == nil || m.max < 10 {
			t.Errorf("topic-id versions of Produce/Fetch advertised without Metadata v10+")
		}
	}
}

// TestRegisterAPIWithoutAuthorization: a row without authorization checks
// (or with a nil one) panics naming the API and is not added, so a gateway
// missing one fails at start-up instead of serving the API unchecked.
func TestRegisterAPIWithoutAuthorization(t *testing.T) {
	const key = 4 // LeaderAndIsr, not served
	if apiTable[key] != nil {
		t.Fatalf("key %d is served; pick another", key)
	}
	for _, auth := range [][]authCheck{nil, {nil}, {authNone, nil}} {
		func() {
			defer func() {
				msg, _ := recover().(string)
				if !strings.Contains(msg, "LeaderAndISR") || !strings.Contains(msg, "authorization") {
					t.Errorf("registerAPI with %d checks: panic %q, want one naming LeaderAndISR and its authorization", len(auth), msg)
				}
			}()
			registerAPI(key, 0, 0, nil, auth...)
		}()
		if apiTable[key] != nil {
			apiTable[key] = nil
			t.Errorf("registerAPI with %d checks added the row", len(auth))
		}
	}
}

// TestErrTableCoversSentinels: every exported Err* sentinel of disbackend
// has a row in errTable.
func TestErrTableCoversSentinels(t *testing.T) {
	fset := token.NewFileSet()
	paths, err := filepath.Glob("../disbackend/*.go")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, path := range paths {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.VAR {
				continue
			}
			for _, s := range gd.Specs {
				for _, n := range s.(*ast.ValueSpec).Names {
					if strings.HasPrefix(n.Name, "Err") {
						names = append(names, n.Name)
					}
				}
			}
		}
	}
	if len(names) == 0 {
		t.Fatal("no sentinels found")
	}
	sentinels := map[string]error{
		"ErrStreamNotFound": disbackend.ErrStreamNotFound, "ErrPartitionNotFound": disbackend.ErrPartitionNotFound,
		"ErrStreamExists": disbackend.ErrStreamExists, "ErrNameCollision": disbackend.ErrNameCollision,
		"ErrInvalidName": disbackend.ErrInvalidName, "ErrInvalidPartitionCount": disbackend.ErrInvalidPartitionCount,
		"ErrInvalidConfig": disbackend.ErrInvalidConfig, "ErrOffsetOutOfRange": disbackend.ErrOffsetOutOfRange,
		"ErrOutOfOrderSequence": disbackend.ErrOutOfOrderSequence, "ErrInvalidProducerEpoch": disbackend.ErrInvalidProducerEpoch,
		"ErrClosed": disbackend.ErrClosed, "ErrUnavailable": disbackend.ErrUnavailable,
		"ErrAppNotFound": disbackend.ErrAppNotFound, "ErrAppExists": disbackend.ErrAppExists,
		"ErrInvalidRecord": disbackend.ErrInvalidRecord, "ErrRecordTooLarge": disbackend.ErrRecordTooLarge,
		"ErrCredentialNotFound": disbackend.ErrCredentialNotFound,
		"ErrNotAuthorized":      disbackend.ErrNotAuthorized, "ErrAuthenticationFailed": disbackend.ErrAuthenticationFailed,
	}
	for _, n := range names {
		s, ok := sentinels[n]
		if !ok {
			t.Errorf("disbackend.%s is new: add it to this test and a row to errTable", n)
			continue
		}
		found := false
		for _, row := range errTable {
			if errors.Is(s, row.err) {
				found = true
			}
		}
		if !found {
			t.Errorf("disbackend.%s has no row in errTable", n)
		}
	}
}
