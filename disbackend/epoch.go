package disbackend

// LeaderEpoch is the leader epoch of every partition: one node leads
// everything and leadership never moves. The gateway reports it in
// Metadata (v7+), ListOffsets and OffsetForLeaderEpoch and stamps it as
// the PartitionLeaderEpoch of every produced batch; a store that builds
// the batches it returns (disrest, from DIS records) stamps it on them, as
// a Kafka broker's fetched batches carry the epoch they were written in.
const LeaderEpoch = 0
