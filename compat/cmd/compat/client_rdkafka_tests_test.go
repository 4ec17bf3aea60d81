package main

import "testing"

// The error of the CI run that failed on 0103's 1 ms init_transactions()
// (test-runner output as rdkafkaFailures picks it).
const rdkafka0103Timing = `0103_transactions failed; [0103_transactions           /  0.006s] TEST FAILURE | ### Test "0103_transactions (do_test_misuse_txn:529)" failed at 0103-transactions.c:601:do_test_misuse_txn() at Sun Dec  6 05:02:17 2026: ### | [<MAIN>                      /  9.103s] TEST FAILURE | ### Test "<MAIN>" failed at test.c:1596:test_wait_exit() at Sun Dec  6 05:02:19 2026: ### | test-runner: test.c:6716: test_fail0: Assertion ` + "`0'" + ` failed. (log /tmp/x/0103.log)`

func TestRdkafkaTimingFailure(t *testing.T) {
	for _, c := range []struct {
		name string
		err  string
		want bool
	}{
		{"the timing assertion", rdkafka0103Timing, true},
		{"another assertion", `### Test "0103_transactions (do_test_basic_producer_txn:1)" failed at 0103-transactions.c:350:do_test_basic_producer_txn() at Sun Dec  6 05:02:17 2026: ### | ### Test "<MAIN>" failed at test.c:1596:test_wait_exit() at Sun Dec  6 05:02:19 2026: ###`, false},
		{"the timing assertion and another", rdkafka0103Timing + ` | ### Test "0103_transactions" failed at 0103-transactions.c:700:do_test_x() at Sun Dec  6 05:02:18 2026: ###`, false},
		{"a timeout", "test-runner timed out after 5m0s; 0103_transactions not reported; no failure line in its output", false},
	} {
		if _, got := rdkafkaTimingFailure(c.err); got != c.want {
			t.Errorf("%s: rdkafkaTimingFailure = %v, want %v", c.name, got, c.want)
		}
	}
}
