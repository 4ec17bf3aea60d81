package disrest

// failpointBeforePut is every new Store's beforePut: nil in the product.
// Built with tag disgw_failpoints (the tests of cmd/disgw build their
// binary so), failpoint_on.go sets it from the environment, so that a test
// of real processes can pause a writer between its fence check (after its
// write intent) and its PutRecords: the late write of docs/cluster.md §4.
// It returns whether it held the writer (the request then leaves whatever
// the writer's deadline).
var failpointBeforePut func(stream string, part int32) (held bool)
