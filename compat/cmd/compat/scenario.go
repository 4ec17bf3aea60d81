package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/disgw/disgw/compat/internal/scen"
)

// errNA marks a step the client has no API for.
var errNA = errors.New("not available in this client")

// groupState is what a client's admin API says about the group.
type groupState struct {
	State     string          // as the client spells it; "" if unknown
	Members   int             // -1 if unknown
	Committed map[int32]int64 // the group's committed offsets for the topic
	Ends      map[int32]int64 // the topic's end offsets
}

// goClient is one Go client's implementation of the scenario's steps.
type goClient interface {
	// Create creates topic with scen.Partitions partitions through the
	// admin API (errNA: the client has none; produce then auto-creates).
	Create(ctx context.Context, topic string) (string, error)
	// Produce produces scen.N keyed records with headers.
	Produce(ctx context.Context, topic string) (string, error)
	// Consume joins group, consumes topic from the earliest offset (when
	// the group has no commit), processes records one at a time until
	// enough(processed) or ctx ends, commits exactly the processed records
	// and closes. It returns what it processed, and an error if ctx ended
	// first or the commit failed.
	Consume(ctx context.Context, topic, group string, enough func([]scen.Rec) bool) ([]scen.Rec, error)
	// Describe describes group and fetches its offsets.
	Describe(ctx context.Context, topic, group string) (groupState, error)
}

// Step time limits.
var (
	adminTimeout   = 20 * time.Second
	produceTimeout = 60 * time.Second
	consumeTimeout = 30 * time.Second
)

// runGoScenario runs the five steps with c and reports them.
func runGoScenario(name string, c goClient, topic, group string, headers bool) {
	ctx := context.Background()

	func() {
		cctx, cancel := context.WithTimeout(ctx, adminTimeout)
		defer cancel()
		detail, err := c.Create(cctx, topic)
		switch {
		case errors.Is(err, errNA):
			scen.NA(scen.StepCreate, "no admin API: the topic is auto-created by produce")
		case err != nil:
			scen.Report(scen.StepCreate, "fail", err.Error())
		default:
			scen.Report(scen.StepCreate, "pass", detail)
		}
	}()

	scen.Run(scen.StepProduce, func() (string, error) {
		pctx, cancel := context.WithTimeout(ctx, produceTimeout)
		defer cancel()
		return c.Produce(pctx, topic)
	})

	var first []scen.Rec
	consumed := scen.Run(scen.StepConsume, func() (string, error) {
		cctx, cancel := context.WithTimeout(ctx, consumeTimeout)
		defer cancel()
		start := time.Now()
		recs, err := c.Consume(cctx, topic, group, func(r []scen.Rec) bool { return len(r) >= scen.Half })
		first = recs
		if cerr := scen.CheckFirst(recs, name, headers); cerr != nil {
			return "", cerr
		}
		if err != nil {
			return "", fmt.Errorf("group consumer processed %d of %d records: %v", len(recs), scen.Half, err)
		}
		return fmt.Sprintf("processed %d records in group %s and committed %s (%.1fs)",
			len(recs), group, scen.FmtOffsets(scen.Committed(recs)), time.Since(start).Seconds()), nil
	})

	if !consumed {
		scen.Skip(scen.StepResume, "needs a committed first consumer (consume failed)")
	} else {
		committed := scen.Committed(first)
		scen.Run(scen.StepResume, func() (string, error) {
			cctx, cancel := context.WithTimeout(ctx, consumeTimeout)
			defer cancel()
			recs, err := c.Consume(cctx, topic, group, func(r []scen.Rec) bool { return scen.Covers(first, r, scen.N) })
			if cerr := scen.CheckResume(first, committed, recs, scen.N, name, headers); cerr != nil {
				if err != nil {
					return "", fmt.Errorf("%v (consumer: %v)", cerr, err)
				}
				return "", cerr
			}
			if err != nil {
				return "", err
			}
			return fmt.Sprintf("new consumer resumed at %s and read the other %d records", scen.FmtOffsets(committed), len(recs)), nil
		})
	}

	func() {
		dctx, cancel := context.WithTimeout(ctx, adminTimeout)
		defer cancel()
		st, err := c.Describe(dctx, topic, group)
		switch {
		case errors.Is(err, errNA):
			scen.NA(scen.StepDescribe, "no group admin API")
		case err != nil:
			scen.Report(scen.StepDescribe, "fail", err.Error())
		default:
			// Every member has left: Kafka's group is Empty.
			if (st.State != "" && !strings.EqualFold(st.State, "Empty")) || st.Members > 0 {
				scen.Report(scen.StepDescribe, "fail", fmt.Sprintf("group state %q with %d members after every consumer closed, want \"Empty\" with 0", st.State, st.Members))
				return
			}
			if err := scen.CheckCommittedAtEnd(st.Committed, st.Ends); err != nil {
				scen.Report(scen.StepDescribe, "fail", fmt.Sprintf("group state %q: %v", st.State, err))
				return
			}
			scen.Report(scen.StepDescribe, "pass", fmt.Sprintf("group state %q, %d members, committed %s = end offsets",
				st.State, st.Members, scen.FmtOffsets(st.Committed)))
		}
	}()
}
