package disrest

import (
	"context"
	"testing"
	"time"

	"github.com/disgw/disgw/disbackend/dislocal"
)

// TestGroupStatesSurviveRestart: group states saved through one Store are
// read back by another over the same DIS (a gateway restart): the latest
// state of each group, none for a group whose state was deleted; the
// stream is compacted and not listed as a topic.
func TestGroupStatesSurviveRestart(t *testing.T) {
	_, url := startDIS(t, dislocal.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := newStore(t, url, func(o *Options) { o.Linger = time.Millisecond })
	if got, err := s.GroupStates(ctx); err != nil || len(got) != 0 {
		t.Fatalf("states of a new project: %v, %v", got, err)
	}
	for _, st := range []struct{ group, state string }{{"g1", "a"}, {"g2", "b"}, {"g1", "c"}, {"g3", "d"}} {
		if err := s.SaveGroupState(ctx, st.group, []byte(st.state)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.SaveGroupState(ctx, "g2", nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := newStore(t, url, nil)
	got, err := s2.GroupStates(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || string(got["g1"]) != "c" || string(got["g3"]) != "d" {
		t.Fatalf("after a restart: %q, want g1=c g3=d", got)
	}
	st, err := s2.DescribeStream(ctx, GroupStream)
	if err != nil || st.Config.CleanupPolicy != "compact" {
		t.Fatalf("%s: %+v, %v; want a compacted stream", GroupStream, st.Config, err)
	}
	sts, err := s2.ListStreams(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range sts {
		if st.Name == GroupStream {
			t.Fatalf("%s is listed as a topic", GroupStream)
		}
	}
}
