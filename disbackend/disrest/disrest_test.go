package disrest

import (
	"net/http/httptest"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"go.uber.org/zap/zaptest"

	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/disbackend/backendtest"
	"github.com/disgw/disgw/disbackend/dislocal"
	"github.com/disgw/disgw/disbackend/localstore"
)

const (
	testAK      = "QTWAOYTTINDUT2QVKYUC"
	testSK      = "MFyfvK41ba2giqM7Uio6PznpdUKGpownRZlmVmHc"
	testProject = "d575b0b740e54221aeb9a165653b103d"
)

// startDIS runs dislocal (signatures checked) over an in-memory localstore
// on 127.0.0.1:0.
func startDIS(t *testing.T, opts dislocal.Options) (*dislocal.Server, string) {
	t.Helper()
	st, err := localstore.Open("dis", localstore.Options{FS: vfs.NewMem(), RetentionCheckInterval: -1, Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	opts.AK, opts.SK, opts.ProjectID = testAK, testSK, testProject
	opts.NoScalingLimits = true
	opts.Logger = zaptest.NewLogger(t)
	s, err := dislocal.New(st, opts)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	return s, hs.URL
}

func newStore(t *testing.T, endpoint string, mod func(*Options)) *Store {
	t.Helper()
	o := Options{Endpoint: endpoint, ProjectID: testProject, AK: testAK, SK: testSK,
		PollInterval: -1, RetryBackoff: 10 * time.Millisecond, RetryTimeout: 20 * time.Second,
		Logger: zaptest.NewLogger(t)}
	if mod != nil {
		mod(&o)
	}
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// TestBackend runs the conformance suite on disrest talking to dislocal.
func TestBackend(t *testing.T) {
	t.Parallel()
	backendtest.RunWith(t, func(t *testing.T) disbackend.Backend {
		_, url := startDIS(t, dislocal.Options{})
		return newStore(t, url, nil)
	}, backendtest.Options{
		RecordLevel:  true,
		MaxRetention: MaxRetentionHours * time.Hour,
		Skip: map[string]string{
			"Checkpoints": "commits offsets beyond the partition's range; DIS refuses checkpoints outside [first : next] " +
				"(DIS.4224); TestCheckpoints covers the rest",
			"CheckpointTime": "DIS keeps no commit time; CommittedAt is the time of the read",
		},
	})
}
