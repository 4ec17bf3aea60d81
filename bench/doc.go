// Package bench holds the throughput benchmarks (their goals are in
// README.md): produce and fetch MB/s through disgw (gateway over
// localstore, synced before every acknowledgement) against franz-go's
// in-memory kfake cluster and (TestRatio's full run) Apache Kafka 4.4.0,
// with the same kgo client options, and their produce latency at a fixed
// rate; and TestDIS (issue 5), the DIS backend's PutRecords per MiB,
// GetRecords per fetch and produce latency, through disrest in front of
// dislocal. Everything lives in the _test files; see README.md for how to
// run it and the measured numbers.
package bench
