package errmap

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/disgw/disgw/disbackend"
)

// TestRowsCoverSentinels: every exported Err* sentinel of disbackend has a
// row in Rows, the table the gateway and groupcoord share.
func TestRowsCoverSentinels(t *testing.T) {
	fset := token.NewFileSet()
	paths, err := filepath.Glob("../../disbackend/*.go")
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
		"ErrStorageFull": disbackend.ErrStorageFull,
		"ErrNotLeader":   disbackend.ErrNotLeader, "ErrNotCoordinator": disbackend.ErrNotCoordinator, "ErrNotController": disbackend.ErrNotController,
		"ErrAppNotFound": disbackend.ErrAppNotFound, "ErrAppExists": disbackend.ErrAppExists,
		"ErrInvalidRecord": disbackend.ErrInvalidRecord, "ErrRecordTooLarge": disbackend.ErrRecordTooLarge,
		"ErrCredentialNotFound": disbackend.ErrCredentialNotFound,
		"ErrNotAuthorized":      disbackend.ErrNotAuthorized, "ErrAuthenticationFailed": disbackend.ErrAuthenticationFailed,
	}
	for _, n := range names {
		s, ok := sentinels[n]
		if !ok {
			t.Errorf("disbackend.%s is new: add it to this test and a row to errmap.Rows", n)
			continue
		}
		found := false
		for _, row := range Rows {
			if errors.Is(s, row.Err) {
				found = true
			}
		}
		if !found {
			t.Errorf("disbackend.%s has no row in errmap.Rows", n)
		}
	}
}

// TestLookup: a caller's rows are looked at before Rows, a row without a
// Code leaves its error unmapped, and wrapped errors match.
func TestLookup(t *testing.T) {
	mine := errors.New("mine")
	first := []Row{
		{disbackend.ErrUnavailable, kerr.CoordinatorNotAvailable},
		{mine, kerr.InvalidGroupID},
		{disbackend.ErrAppNotFound, nil},
	}
	cases := []struct {
		name  string
		err   error
		first []Row
		want  *kerr.Error // nil: unmapped
	}{
		{"nil", nil, first, nil},
		{"shared row", fmt.Errorf("op: %w", disbackend.ErrStreamNotFound), nil, kerr.UnknownTopicOrPartition},
		{"shared row under a caller's", fmt.Errorf("op: %w", disbackend.ErrStreamNotFound), first, kerr.UnknownTopicOrPartition},
		{"the caller's row first", fmt.Errorf("op: %w", disbackend.ErrUnavailable), first, kerr.CoordinatorNotAvailable},
		{"the caller's row alone", mine, first, kerr.InvalidGroupID},
		{"the gateway's", disbackend.ErrUnavailable, nil, kerr.RequestTimedOut},
		{"unmapped by the caller", disbackend.ErrAppNotFound, first, nil},
		{"mapped by the gateway", disbackend.ErrAppNotFound, nil, kerr.GroupIDNotFound},
		{"no row", errors.New("other"), first, nil},
		// A batch refused for some of its records maps by its Err.
		{"record errors", fmt.Errorf("op: %w", &disbackend.RecordsError{Err: disbackend.ErrInvalidRecord,
			Records: []disbackend.RecordError{{Index: 3, Message: "m"}}}), nil, kerr.InvalidRecord},
		{"record errors too large", &disbackend.RecordsError{Err: fmt.Errorf("op: %w", disbackend.ErrRecordTooLarge),
			Records: []disbackend.RecordError{{Index: 0, Message: "m"}}}, nil, kerr.MessageTooLarge},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := Lookup(tc.err, tc.first)
			if got != tc.want || ok != (tc.want != nil) {
				t.Fatalf("Lookup: %v, %v; want %v", got, ok, tc.want)
			}
		})
	}
}
