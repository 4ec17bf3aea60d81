package gateway

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// cappedBelowKmsg lists API keys we serve below the newest version kmsg
// knows, with the reason. Empty: we serve every API at its newest version.
var cappedBelowKmsg = map[int16]string{
	24: "AddPartitionsToTxn v4-5 are the batched form brokers send each other (CLUSTER_ACTION); clients send v3 at most",
	27: "WriteTxnMarkers v2 carries the transaction version (KIP-890 part 2), not built",
	26: "EndTxn v5 is KIP-890 part 2 (transaction.version 2), not advertised (docs/transactions.md)",
	28: "TxnOffsetCommit v5 is KIP-890 part 2 (transaction.version 2), v6 its next step; not advertised",
}

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
