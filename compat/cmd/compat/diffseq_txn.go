package main

import (
	"encoding/binary"
	"reflect"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// seqTxns: transactions (docs/transactions.md) as a client's requests make
// them, on both servers: the coordinator, an aborted and a committed
// transaction with markers, the last stable offset, aborted transactions
// in a read_committed Fetch, transactional offsets, a fenced epoch and the
// errors of requests out of place. Kafka writes markers after EndTxn has
// answered, so what follows an EndTxn waits until the partition is stable
// (disgw is at once).
func seqTxns(t *diffTarget, p string) {
	tt := p + "tx"
	createTopic(t, "", tt, 2, nil)
	id := p + "txn"
	group := p + "txg"

	// FindCoordinator v0 knows only groups; Kafka creates and loads
	// __transaction_state at the first transaction lookup, so every run
	// makes one at v1 first, unrecorded, until the coordinator answers.
	warm := kmsg.NewPtrFindCoordinatorRequest()
	warm.SetVersion(1)
	warm.CoordinatorType, warm.CoordinatorKey = 1, id
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if r, err := t.w.do(warm); err == nil && r.(*kmsg.FindCoordinatorResponse).ErrorCode == 0 {
			break
		}
	}
	if t.v(10) >= 1 {
		fc := kmsg.NewPtrFindCoordinatorRequest()
		fc.CoordinatorType, fc.CoordinatorKey, fc.CoordinatorKeys = 1, id, []string{id}
		t.doRetry("FindCoordinator (transaction) "+id, fc, txnRetriable)
	}

	long := initTxnReq(id, 3600000)
	t.doRetry("InitProducerId with a timeout above transaction.max.timeout.ms", long, txnRetriable)
	pid, epoch := int64(-1), int16(-1)
	if r, ok := t.doRetry("InitProducerId "+id, initTxnReq(id, 60000), txnRetriable).(*kmsg.InitProducerIDResponse); ok {
		pid, epoch = r.ProducerID, r.ProducerEpoch
	}

	// (A transactional produce before AddPartitionsToTxn is not compared:
	// Kafka 4.4 finalizes transaction.version 2, under which Produce v12+
	// adds the partition itself; disgw does not advertise it and answers
	// INVALID_TXN_STATE, as Kafka does under version 1.)
	t.doRetry("EndTxn commit with no transaction open", endTxnReq(id, pid, epoch, true), txnRetriable)

	t.doRetry("AddPartitionsToTxn tx[0], tx[1]", addPartsReq(id, pid, epoch, tt, 0, 1), txnRetriable)
	produce(t, "Produce 3 transactional records to tx[0]", txnProduceReq(tt, 0, id, txnBatch(3, pid, epoch, 0)))
	produce(t, "Produce 2 transactional records to tx[1]", txnProduceReq(tt, 1, id, txnBatch(2, pid, epoch, 0)))
	produce(t, "Produce 1 plain record to tx[0] in the transaction's range", produceReq(tt, 0, recordBatch(1, -1, -1, -1)))

	tid := topicID(t, tt)
	t.do("ListOffsets tx[0] latest, read_uncommitted", listOffsetsReq(tt, 0, -1))
	t.do("ListOffsets tx[0] latest, read_committed (the last stable offset)", committed(listOffsetsReq(tt, 0, -1)))
	t.do("Fetch read_committed tx[0] at 0 during the transaction", committedFetch(fetchReq(t, tt, tid, map[int32]int64{0: 0})))
	t.do("Fetch read_uncommitted tx[0] at 0 during the transaction", fetchReq(t, tt, tid, map[int32]int64{0: 0}))

	dp := kmsg.NewPtrDescribeProducersRequest()
	dp.Topics = []kmsg.DescribeProducersRequestTopic{{Topic: tt, Partitions: []int32{0}}}
	t.do("DescribeProducers tx[0] during the transaction", dp)
	t.do("DescribeTransactions during the transaction", describeTxnReq(id))

	t.doRetry("EndTxn abort", endTxnReq(id, pid, epoch, false), txnRetriable)
	untilStable(t, "Fetch read_committed tx[0] at 0 after the abort", committedFetch(fetchReq(t, tt, tid, map[int32]int64{0: 0, 1: 0})))
	t.do("ListOffsets tx[0] latest, read_committed, after the abort", committed(listOffsetsReq(tt, 0, -1)))
	untilComplete(t, "DescribeTransactions after the abort", describeTxnReq(id))

	t.doRetry("AddPartitionsToTxn tx[0]", addPartsReq(id, pid, epoch, tt, 0), txnRetriable)
	t.doRetry("AddOffsetsToTxn "+group, addOffsetsReq(id, pid, epoch, group), txnRetriable)
	produce(t, "Produce 2 transactional records to tx[0], sequence 3", txnProduceReq(tt, 0, id, txnBatch(2, pid, epoch, 3)))
	toc := kmsg.NewPtrTxnOffsetCommitRequest()
	toc.TransactionalID, toc.Group, toc.ProducerID, toc.ProducerEpoch, toc.Generation = id, group, pid, epoch, -1
	toc.Topics = []kmsg.TxnOffsetCommitRequestTopic{{Topic: tt, Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{
		{Partition: 1, Offset: 2, LeaderEpoch: -1, Metadata: ptr("m")}}}}
	t.doRetry("TxnOffsetCommit tx[1] offset 2", toc, txnRetriable)
	of := kmsg.NewPtrOffsetFetchRequest()
	of.Group, of.RequireStable = group, true
	of.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: tt, Partitions: []int32{1}}}
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group = group
	rg.Topics = []kmsg.OffsetFetchRequestGroupTopic{{Topic: tt, TopicID: tid, Partitions: []int32{1}}}
	of.Groups = []kmsg.OffsetFetchRequestGroup{rg}
	if t.v(9) >= 7 {
		t.do("OffsetFetch require_stable with a transactional offset pending", of)
	}
	t.doRetry("EndTxn commit", endTxnReq(id, pid, epoch, true), txnRetriable)
	untilStable(t, "Fetch read_committed tx[0] at 0 after the commit", committedFetch(fetchReq(t, tt, tid, map[int32]int64{0: 0})))
	untilComplete(t, "DescribeTransactions after the commit", describeTxnReq(id))
	of.RequireStable = false
	t.do("OffsetFetch after the commit", of)

	t.doRetry("EndTxn commit again (a retry)", endTxnReq(id, pid, epoch, true), txnRetriable)
	t.doRetry("EndTxn abort after the commit", endTxnReq(id, pid, epoch, false), txnRetriable)
	if t.v(66) >= 2 {
		lt := kmsg.NewPtrListTransactionsRequest()
		lt.TransactionalIDPattern = ptr(strings.ReplaceAll(p, "-", "\\-") + ".*")
		t.do("ListTransactions of this run", lt)
	}

	// A second producer of the id fences the first.
	t.doRetry("InitProducerId "+id+" again (fences the first)", initTxnReq(id, 60000), txnRetriable)
	t.doRetry("AddPartitionsToTxn with the fenced epoch", addPartsReq(id, pid, epoch, tt, 0), txnRetriable)
	produce(t, "Produce transactional with the fenced epoch", txnProduceReq(tt, 0, id, txnBatch(1, pid, epoch, 5)))
	t.doRetry("EndTxn with the fenced epoch", endTxnReq(id, pid, epoch, true), txnRetriable)
	t.doRetry("AddPartitionsToTxn of an unknown topic", addPartsReq(id, pid, epoch+1, p+"no-such-topic", 0), txnRetriable)
	t.doRetry("AddOffsetsToTxn of an unknown transactional id", addOffsetsReq(p+"unknown", pid, epoch, group), txnRetriable)
	t.do("DescribeTransactions of an unknown transactional id", describeTxnReq(p+"unknown"))
}

// txnRetriable is anyRetriable and CONCURRENT_TRANSACTIONS, which a client
// retries (Kafka answers it while it writes the previous markers).
func txnRetriable(resp kmsg.Response) int16 {
	if c := anyRetriable(resp); c != 0 {
		return c
	}
	if c := firstCode(resp, 16); c != 0 {
		return c // NOT_COORDINATOR: Kafka's __transaction_state is still loading
	}
	var code int16
	switch r := resp.(type) {
	case *kmsg.InitProducerIDResponse:
		code = r.ErrorCode
	case *kmsg.EndTxnResponse:
		code = r.ErrorCode
	case *kmsg.AddOffsetsToTxnResponse:
		code = r.ErrorCode
	case *kmsg.AddPartitionsToTxnResponse:
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode == 51 {
					code = 51
				}
			}
		}
	}
	if code == 51 {
		return code
	}
	return 0
}

// firstCode returns code if any ErrorCode of resp is code, else 0.
func firstCode(resp kmsg.Response, code int16) int16 {
	var find func(v reflect.Value) bool
	find = func(v reflect.Value) bool {
		switch v.Kind() {
		case reflect.Pointer:
			return !v.IsNil() && find(v.Elem())
		case reflect.Struct:
			for i := 0; i < v.NumField(); i++ {
				f := v.Type().Field(i)
				if !f.IsExported() {
					continue
				}
				if f.Name == "ErrorCode" && f.Type.Kind() == reflect.Int16 && int16(v.Field(i).Int()) == code {
					return true
				}
				if find(v.Field(i)) {
					return true
				}
			}
		case reflect.Slice:
			for i := 0; i < v.Len(); i++ {
				if find(v.Index(i)) {
					return true
				}
			}
		}
		return false
	}
	if find(reflect.ValueOf(resp)) {
		return code
	}
	return 0
}

// untilStable records a read_committed Fetch once every partition's last
// stable offset has reached its high watermark (Kafka writes the markers
// after EndTxn answers) and, on the DIS backend, its records reach the last
// stable offset too: a DIS read at an offset still in the gateway's
// read-ahead buffer answers what the buffer holds, so an unrecorded fetch
// from where it ends first reads the rest into the buffer (a consumer
// fetches from there next anyway).
func untilStable(t *diffTarget, label string, req *kmsg.FetchRequest) {
	t.doRetry(label, req, func(resp kmsg.Response) int16 {
		r, ok := resp.(*kmsg.FetchResponse)
		if !ok {
			return 0
		}
		var code int16
		for i, rt := range r.Topics {
			for j, p := range rt.Partitions {
				if p.ErrorCode == 0 && p.LastStableOffset < p.HighWatermark {
					code = 51
				}
				if end := batchesEnd(p.RecordBatches); flattenBatches && p.ErrorCode == 0 && end >= 0 && end < p.LastStableOffset &&
					i < len(req.Topics) && j < len(req.Topics[i].Partitions) {
					more := *req
					more.Topics = []kmsg.FetchRequestTopic{req.Topics[i]}
					more.Topics[0].Partitions = []kmsg.FetchRequestTopicPartition{req.Topics[i].Partitions[j]}
					more.Topics[0].Partitions[0].FetchOffset = end
					_, _, _ = t.send(&more)
					code = 51
				}
			}
		}
		return code
	})
}

// batchesEnd is the offset after the last batch of a Fetch's record
// batches, -1 when there are none.
func batchesEnd(b []byte) int64 {
	end := int64(-1)
	for len(b) >= 27 {
		n := int(binary.BigEndian.Uint32(b[8:12]))
		end = int64(binary.BigEndian.Uint64(b[:8])) + int64(int32(binary.BigEndian.Uint32(b[23:27]))) + 1
		if 12+n > len(b) {
			break
		}
		b = b[12+n:]
	}
	return end
}

// untilComplete records a DescribeTransactions once no transaction is in a
// Prepare state.
func untilComplete(t *diffTarget, label string, req *kmsg.DescribeTransactionsRequest) {
	t.doRetry(label, req, func(resp kmsg.Response) int16 {
		r, ok := resp.(*kmsg.DescribeTransactionsResponse)
		if !ok {
			return 0
		}
		for _, s := range r.TransactionStates {
			if strings.HasPrefix(s.State, "Prepare") {
				return 51
			}
		}
		return 0
	})
}

func initTxnReq(id string, timeoutMS int32) *kmsg.InitProducerIDRequest {
	r := kmsg.NewPtrInitProducerIDRequest()
	r.TransactionalID, r.TransactionTimeoutMillis, r.ProducerID, r.ProducerEpoch = ptr(id), timeoutMS, -1, -1
	return r
}

func endTxnReq(id string, pid int64, epoch int16, commit bool) *kmsg.EndTxnRequest {
	r := kmsg.NewPtrEndTxnRequest()
	r.TransactionalID, r.ProducerID, r.ProducerEpoch, r.Commit = id, pid, epoch, commit
	return r
}

func addPartsReq(id string, pid int64, epoch int16, topic string, parts ...int32) *kmsg.AddPartitionsToTxnRequest {
	r := kmsg.NewPtrAddPartitionsToTxnRequest()
	r.TransactionalID, r.ProducerID, r.ProducerEpoch = id, pid, epoch
	r.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: topic, Partitions: parts}}
	return r
}

func addOffsetsReq(id string, pid int64, epoch int16, group string) *kmsg.AddOffsetsToTxnRequest {
	r := kmsg.NewPtrAddOffsetsToTxnRequest()
	r.TransactionalID, r.ProducerID, r.ProducerEpoch, r.Group = id, pid, epoch, group
	return r
}

func describeTxnReq(ids ...string) *kmsg.DescribeTransactionsRequest {
	r := kmsg.NewPtrDescribeTransactionsRequest()
	r.TransactionalIDs = ids
	return r
}

func txnProduceReq(topic string, partition int32, id string, batch []byte) *kmsg.ProduceRequest {
	r := produceReq(topic, partition, batch)
	r.TransactionID = ptr(id)
	return r
}

// txnBatch is recordBatch with the transactional attribute.
func txnBatch(n int, pid int64, epoch int16, seq int32) []byte {
	return recordBatchAttrs(n, pid, epoch, seq, 0x10)
}

func committed(r *kmsg.ListOffsetsRequest) *kmsg.ListOffsetsRequest {
	r.IsolationLevel = 1
	return r
}

func committedFetch(r *kmsg.FetchRequest) *kmsg.FetchRequest {
	r.IsolationLevel = 1
	return r
}
