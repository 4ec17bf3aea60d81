package gateway

// ListTransactions: v0-2 (KIP-664; v1 the duration filter, KIP-994; v2 the
// transactional id pattern, KIP-1152), flexible: the transactional ids the
// coordinator knows, filtered by state, producer id, time open and id
// pattern (a Java regular expression; Go's RE2 reads the common ones, and
// one it cannot read gets INVALID_REGULAR_EXPRESSION). Without a
// coordinator (txn.go) the list is empty.

import (
	"regexp"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/disgw/disgw/internal/acl"
	"github.com/disgw/disgw/kafkawire"
)

// ListTransactions lists only the ids the principal may DESCRIBE, as Kafka.
func init() {
	registerAPI(66, 0, 2, (*conn).handleListTransactions, authNone)
}

func (c *conn) handleListTransactions(req *kafkawire.Request) reply {
	r := req.Body.(*kmsg.ListTransactionsRequest)
	resp := r.ResponseKind().(*kmsg.ListTransactionsResponse)
	resp.UnknownStateFilters = []string{}
	known := map[string]bool{"Empty": true, "Ongoing": true, "PrepareCommit": true, "PrepareAbort": true,
		"CompleteCommit": true, "CompleteAbort": true, "Dead": true, "PrepareEpochFence": true}
	var states []string
	for _, s := range r.StateFilters {
		if known[s] {
			states = append(states, s)
		} else {
			resp.UnknownStateFilters = append(resp.UnknownStateFilters, s)
		}
	}
	if len(r.StateFilters) > 0 && len(states) == 0 {
		return ready(req, resp) // only unknown states: nothing matches
	}
	var pattern *regexp.Regexp
	if r.TransactionalIDPattern != nil && *r.TransactionalIDPattern != "" {
		re, err := regexp.Compile("^(?:" + *r.TransactionalIDPattern + ")$")
		if err != nil {
			resp.ErrorCode = kerr.InvalidRegularExpression.Code
			return ready(req, resp)
		}
		pattern = re
	}
	if c.s.txn == nil {
		return ready(req, resp)
	}
	for _, d := range c.s.txn.List(states, r.ProducerIDFilters, r.DurationFilterMillis, pattern) {
		if !c.may(acl.OpDescribe, acl.ResourceTransactionalID, d.ID) {
			continue
		}
		st := kmsg.NewListTransactionsResponseTransactionState()
		st.TransactionalID, st.ProducerID, st.TransactionState = d.ID, d.ProducerID, d.State.String()
		resp.TransactionStates = append(resp.TransactionStates, st)
	}
	return ready(req, resp)
}
