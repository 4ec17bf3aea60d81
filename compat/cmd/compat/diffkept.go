package main

import (
	"fmt"
	"reflect"
	"regexp"
	"strings"
)

// The differences between Apache Kafka's answers and disgw's that the
// differential harness keeps (does not count as failures). Every other
// difference fails it. The categories are those issue 13 allows: node ids,
// hosts and ports, topic ids, timestamps and other time-derived or
// server-generated values, the replication of a one-node gateway, and a
// short list of deliberate choices, each with its reason. The harness
// prints this table at the start of its run.

// keptRule keeps the differences of fields whose path matches Path (a
// glob: * is any run of characters within one path element, ** any run
// across elements) in the responses of API ("" for every API), when the
// two values have the same shape (Shape, when set: e.g. both valid node
// ids, both set timestamps).
type keptRule struct {
	Category string
	API      string
	Backend  string // "dis": kept only on the DIS backend; "" on both
	MaxVer   int16  // kept only at versions up to this; 0: every version
	Path     string
	Reason   string
	Shape    func(kafka, disgw reflect.Value) bool
	re       *regexp.Regexp
}

const (
	catNodeIDs     = "node ids"
	catHosts       = "hosts and ports"
	catTopicIDs    = "topic ids"
	catTime        = "timestamps and time-derived values"
	catGenerated   = "ids the server generates"
	catReplication = "replication, ISR and ELR of a one-node gateway"
	catDeliberate  = "deliberate choice"
)

var keptRules = []*keptRule{
	{Category: catNodeIDs, Path: "**NodeID", Shape: sameSign, Reason: "Kafka's node is 1, disgw's 0"},
	{Category: catNodeIDs, Path: "**Leader", Shape: sameSignInt, Reason: "the partition leader: Kafka's node 1, disgw's 0"},
	{Category: catNodeIDs, Path: "**LeaderID", Shape: sameSignInt, Reason: "the partition leader: Kafka's node 1, disgw's 0"},
	{Category: catNodeIDs, Path: "**ControllerID", Shape: sameSign, Reason: "the controller: Kafka's node 1, disgw's 0"},
	{Category: catNodeIDs, Path: "**BrokerID", Shape: sameSign, Reason: "Kafka's node is 1, disgw's 0"},
	{Category: catNodeIDs, Path: "Brokers[*]", Reason: "the one broker, keyed by its node id"},
	{Category: catNodeIDs, API: "DescribeConfigs", Path: "Resources[4/*]", Reason: "the broker resource is named by its node id"},
	{Category: catHosts, Path: "**Host", Reason: "each server listens on its own free port"},
	{Category: catHosts, Path: "**Port", Reason: "each server listens on its own free port"},
	{Category: catHosts, API: "DescribeConfigs", Path: "**Value", Shape: sameModuloAddr, Reason: "broker configs naming the listeners' addresses (listeners, advertised.listeners, ...)"},
	{Category: catHosts, API: "DescribeConfigs", Path: `**Configs["log.dirs"]**`, Reason: "the server's own log directory (disgw's data directory or DIS is not a Kafka log directory, and is not listed)"},
	{Category: catNodeIDs, API: "DescribeConfigs", Path: `**Configs["broker.id"]**Value`, Reason: "Kafka's node is 1, disgw's 0"},
	{Category: catNodeIDs, API: "DescribeConfigs", Path: `**Configs["node.id"]**Value`, Reason: "Kafka's node is 1, disgw's 0"},
	{Category: catHosts, Path: "**UsableBytes", Shape: sameSign, Reason: "the host's file system, which anything may write to"},
	{Category: catHosts, Path: "**TotalBytes", Shape: sameSign, Reason: "the host's file system"},
	{Category: catTopicIDs, Path: "**TopicID", Shape: sameZero, Reason: "random per topic"},
	{Category: catTime, Path: "**ThrottleMillis", Reason: "quota throttling depends on timing"},
	{Category: catTime, Path: "**Timestamp", Shape: sameSign, Reason: "the server's clock"},
	{Category: catTime, Path: "**LogAppendTime", Shape: sameSign, Reason: "the server's clock"},
	{Category: catTime, API: "ApiVersions", Path: "FinalizedFeaturesEpoch", Shape: sameSign, Reason: "the metadata log's offset of the last feature change"},
	{Category: catTime, Path: "**ClusterID", Shape: sameZero, Reason: "random per Kafka cluster; disgw's is derived from its data directory or DIS project"},
	{Category: catGenerated, Path: "**MemberID", Shape: sameZero, Reason: "the coordinator generates member ids"},
	{Category: catGenerated, API: "JoinGroup", Path: "LeaderID", Shape: sameZero, Reason: "the leader's generated member id"},
	{Category: catGenerated, API: "JoinGroup", Path: "Leader", Shape: sameZero, Reason: "the leader's generated member id"},
	{Category: catGenerated, Path: "**ProducerID", Shape: sameSign, Reason: "producer ids are allocated by the server"},
	{Category: catReplication, Path: "**Replicas", Reason: "Kafka lists node 1, disgw node 0"},
	{Category: catReplication, Path: "**ISR", Reason: "Kafka lists node 1, disgw node 0"},
	{Category: catReplication, Path: "**OfflineReplicas", Reason: "one node"},
	{Category: catReplication, Path: "**EligibleLeaderReplicas", Reason: "ELR of one node"},
	{Category: catReplication, Path: "**LastKnownELR", Reason: "ELR of one node"},
	{Category: catDeliberate, Path: "**ErrorMessage", Shape: sameZero,
		Reason: "free text in each server's own words; the error code is compared, and whether a message is given"},
	{Category: catDeliberate, API: "DescribeConfigs", Path: `Resources[BROKER/**ReadOnly`,
		Reason: "every broker key is read-only: disgw's broker configs come from its configuration file (AlterConfigs on a broker is INVALID_REQUEST)"},
	{Category: catDeliberate, API: "DescribeConfigs", Path: `**Configs["controller.**`,
		Reason: "Kafka's KRaft controller listener and quorum: disgw has no controller (its one node answers for the cluster)"},
	{Category: catDeliberate, API: "DescribeConfigs", Path: `**Configs["listeners"]**Value`,
		Reason: "Kafka's listeners include its KRaft CONTROLLER listener; disgw has only its PLAINTEXT one"},
	{Category: catDeliberate, API: "DescribeConfigs", Path: `**Configs["listener.security.protocol.map"]**Value`,
		Reason: "Kafka's map includes its KRaft CONTROLLER listener; disgw has only PLAINTEXT"},
	{Category: catDeliberate, Path: `**Configs["offsets.topic.num.partitions"]**Value`,
		Reason: "the harness's Kafka runs with offsets.topic.num.partitions=3 (kafkabroker.go); disgw lists Kafka's default, 50"},
	{Category: catDeliberate, API: "Metadata", Path: `Topics["__consumer_offsets"]`,
		Reason: "Kafka creates __consumer_offsets at the first FindCoordinator and lists it from then on; disgw's group offsets (kept in its backend) always exist, so it always lists it"},
	{Category: catDeliberate, API: "Metadata", Path: `Topics["__consumer_offsets"].Partitions**`,
		Reason: "the harness's Kafka runs with offsets.topic.num.partitions=3 (kafkabroker.go); disgw lists Kafka's default, 50"},
	{Category: catDeliberate, Path: `**Configs["dis.record.format"]**`,
		Reason: "disgw's own topic config: how the DIS backend stores the topic's records"},
	{Category: catDeliberate, Path: `**Configs["max.decompressed.message.bytes"]**Value`,
		Reason: "disgw's default is its max_decompressed_message_bytes, 100 MiB, which it enforces per batch (Kafka's is near 2 GiB)"},
	{Category: catDeliberate, Path: `**Configs["message.timestamp.after.max.ms"]**Value`,
		Reason: "disgw does not refuse batches with future timestamps (Kafka 4 refuses more than 1 hour ahead): the real value is Long.MAX"},
	{Category: catDeliberate, Path: `**Configs["log.message.timestamp.after.max.ms"]**Value`,
		Reason: "disgw does not refuse batches with future timestamps (Kafka 4 refuses more than 1 hour ahead): the real value is Long.MAX"},
	{Category: catDeliberate, API: "DescribeConfigs", Path: `**Configs["max.connections"]**Value`,
		Reason: "disgw's max_connections (4096 by default); Kafka has no limit by default"},
	{Category: catDeliberate, API: "DescribeConfigs", Path: `**Configs["max.connections.per.ip"]**Value`,
		Reason: "disgw's max_connections_per_ip (1024 by default); Kafka has no limit by default"},
	{Category: catDeliberate, Backend: "dis", Path: `**Configs["retention.ms"]**`, Shape: disRetentionDefault,
		Reason: "the DIS backend's topics keep data 24 hours by default (DIS's default data_duration; README: default_retention), so a topic at the default has retention.ms 86400000 from the broker's log.retention.ms, STATIC_BROKER_CONFIG, where Kafka's is 604800000 from log.retention.hours; only that pair of values is kept"},
	{Category: catDeliberate, Backend: "dis", Path: `**Configs["log.retention.ms"]**`, Shape: disRetentionDefault,
		Reason: "as retention.ms: the DIS backend's log.retention.ms is 86400000, STATIC_BROKER_CONFIG, where Kafka's is null (log.retention.hours 168 gives it)"},
	{Category: catDeliberate, API: "ApiVersions", Path: "ApiKeys[*].MinVersion", Shape: disgwLower,
		Reason: "disgw still serves the versions Kafka 4 removed (KIP-896) for old clients; they are checked against Kafka 3.x's answers instead"},
	{Category: catDeliberate, API: "ApiVersions", Path: "ApiKeys[0].MinVersion",
		Reason: "Produce v0-2 carry message format v0 and v1 (magic 0 and 1), which disgw does not store; every client since Kafka 0.11 (2017) sends v3+ with magic 2, and a v0-2 request is refused with UNSUPPORTED_VERSION"},
	{Category: catDeliberate, API: "ApiVersions", Path: "ApiKeys[24].MaxVersion",
		Reason: "AddPartitionsToTxn v4-5 are the batched form Kafka's brokers send each other (KIP-890 part 1 verification, CLUSTER_ACTION); a gateway has no brokers to ask it, and clients send v3 at most (docs/transactions.md)"},
	{Category: catDeliberate, API: "ApiVersions", Path: "ApiKeys[26].MaxVersion",
		Reason: "EndTxn v5 is KIP-890 part 2 (transaction.version 2: the epoch bumped at each end), not built; clients use v4, as with a Kafka 3.x broker (docs/transactions.md)"},
	{Category: catDeliberate, API: "ApiVersions", Path: "ApiKeys[27].MaxVersion",
		Reason: "WriteTxnMarkers v2 carries the transaction version (KIP-890 part 2), not built; the transactions tool's abort sends v1 (docs/transactions.md)"},
	{Category: catDeliberate, API: "ApiVersions", Path: "ApiKeys[28].MaxVersion",
		Reason: "TxnOffsetCommit v5 is KIP-890 part 2 (no AddOffsetsToTxn first), not built; clients use v4 (docs/transactions.md)"},
	{Category: catDeliberate, API: "ApiVersions", Path: "SupportedFeatures**",
		Reason: "disgw advertises group.version 1 alone (the KIP-848 consumer protocol, with group_consumer_protocol on): transaction.version 2 would tell clients transactions v2 are served, share.version and streams.version the share and streams groups, none of which disgw serves; metadata.version, kraft.version and eligible.leader.replicas.version describe a controller quorum and replicas it does not have"},
	{Category: catDeliberate, API: "ApiVersions", Path: "FinalizedFeatures**", Reason: "as SupportedFeatures"},
	{Category: catDeliberate, API: "ApiVersions", Path: "FinalizedFeaturesEpoch", Reason: "as SupportedFeatures: disgw's features change only with its setting, at a restart, so its epoch is a constant 1"},
	{Category: catDeliberate, API: "CreateTopics", Path: `Topics["*badrf"]**`,
		Reason: "a replication factor above 1 is accepted: the data lives in the backend (DIS keeps three copies of every stream; the embedded store is one node's disk, as the README says), and refusing 3 would break clients configured for a production cluster (Kafka Connect's internal topics and Kafka Streams' topics ask for 3 when so configured); Metadata reports the one replica"},
	{Category: catDeliberate, Path: `Topics["*badrf"]**`, Reason: "the topic of replication factor 3 exists on disgw (see CreateTopics), so Metadata and ElectLeaders of every topic list it"},
	{Category: catDeliberate, API: "ListConfigResources", Path: `ConfigResources[2/"*badrf"]`, Reason: "the topic of replication factor 3 exists on disgw (see CreateTopics), so a listing of every topic lists it"},
	{Category: catDeliberate, API: "Metadata", MaxVer: 3, Path: `Topics["*-t2"]**`,
		Reason: "auto-creation (Metadata v0-3 naming an unknown topic): disgw creates the topic before answering, so the first answer already lists it; Kafka's controller creates it asynchronously and answers UNKNOWN_TOPIC_OR_PARTITION first; clients retry either way and then see the same topic"},
	{Category: catDeliberate, Backend: "dis", Path: `**Configs["retention.ms"].Value`, Shape: disCompactedRetention,
		Reason: "DIS backend: a compacted topic keeps data DIS's longest, 168 h, whatever retention.ms it asks for, so that its live keys are copied as seldom as possible (README: Compacted topics on DIS)"},
	{Category: catDeliberate, API: "Fetch", Backend: "dis", Path: "**RecordBatches (records compared one by one)",
		Reason: "DIS backend: each Kafka record is one DIS record, and a fetch rebuilds batches from consecutive records, so batch boundaries differ; the harness compares the records one by one (offset, timestamp, key, value, headers, and their batch's leader epoch, magic, attributes and CRC)"},
	{Category: catDeliberate, API: "Fetch", Backend: "dis", Path: "**RecordBatches[*].ProducerID",
		Reason: "DIS backend, native record format: each Kafka record is one DIS record, readable by DIS applications; the batch's producer id, epoch and sequence are the gateway's idempotence state (kept in DIS apart from the records) and are not rebuilt in fetched batches, which consumers do not read (transactions are not served)"},
	{Category: catDeliberate, API: "Fetch", Backend: "dis", Path: "**RecordBatches[*].ProducerEpoch", Reason: "as ProducerID"},
	{Category: catDeliberate, API: "Fetch", Backend: "dis", Path: "**RecordBatches[*].FirstSequence", Reason: "as ProducerID"},
	{Category: catDeliberate, API: "DescribeLogDirs", Backend: "dis", Path: "Dirs[*].Topics[*].Partitions[*].Size",
		Reason: "DIS backend: DIS does not tell a partition's size (DescribeStream gives sequence numbers, not bytes), so disgw reports -1 rather than a made-up size (README \"What works\")"},
	{Category: catDeliberate, API: "DescribeLogDirs", Backend: "dis", Path: "Dirs[*].TotalBytes", Reason: "DIS backend: the data is in DIS, whose capacity is not a volume's: -1, as Kafka allows for unknown"},
	{Category: catDeliberate, API: "DescribeLogDirs", Backend: "dis", Path: "Dirs[*].UsableBytes", Reason: "as TotalBytes"},
	{Category: catDeliberate, API: "ApiVersions", Path: "ApiKeys[*]", Shape: unservedOutsideIssue,
		Reason: "an API outside the README's table of served APIs (KIP-848 groups, transactions, ACLs, SASL, quotas, share groups, ...: the README's \"Not yet\"); the harness covers every API disgw serves"},
}

func init() {
	for _, r := range keptRules {
		r.re = globRE(r.Path)
	}
}

var trailingIndex = regexp.MustCompile(`(\[[0-9]+\])+$`)

func globRE(g string) *regexp.Regexp {
	var b strings.Builder
	b.WriteString("^")
	for i := 0; i < len(g); i++ {
		switch {
		case strings.HasPrefix(g[i:], "**"):
			b.WriteString(".*")
			i++
		case g[i] == '*':
			b.WriteString(`[^.\[\]]*`)
		default:
			b.WriteString(regexp.QuoteMeta(g[i : i+1]))
		}
	}
	b.WriteString("$")
	return regexp.MustCompile(b.String())
}

// keep returns the rule that keeps d in a response of api, or nil.
func keep(api, backend string, ver int16, d *fieldDiff) *keptRule {
	p := strings.TrimSuffix(d.Path, ".len")
	bare := trailingIndex.ReplaceAllString(p, "") // Replicas[0] is in Replicas
	for _, r := range keptRules {
		if r.API != "" && r.API != api || r.Backend != "" && r.Backend != backend || r.MaxVer > 0 && ver > r.MaxVer {
			continue
		}
		if !r.re.MatchString(p) && !r.re.MatchString(bare) {
			continue
		}
		if r.Shape != nil && !r.Shape(d.kval, d.dval) {
			continue
		}
		return r
	}
	return nil
}

func intOf(v reflect.Value) (int64, bool) {
	if !v.IsValid() {
		return 0, false
	}
	switch v.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return v.Int(), true
	}
	return 0, false
}

// sameSign: two integers both negative (unset) or both not.
func sameSign(a, b reflect.Value) bool {
	x, ok1 := intOf(a)
	y, ok2 := intOf(b)
	return ok1 && ok2 && (x < 0) == (y < 0)
}

// sameSignInt is sameSign for integer fields only (a string Leader is a
// member id).
func sameSignInt(a, b reflect.Value) bool { return sameSign(a, b) }

// sameZero: both zero (empty, null) or both set.
func sameZero(a, b reflect.Value) bool {
	if !a.IsValid() || !b.IsValid() {
		return false
	}
	za, zb := a.IsZero(), b.IsZero()
	if a.Kind() == reflect.Pointer && !a.IsNil() {
		za = a.Elem().IsZero()
	}
	if b.Kind() == reflect.Pointer && !b.IsNil() {
		zb = b.Elem().IsZero()
	}
	return za == zb
}

var addrRE = regexp.MustCompile(`[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+:[0-9]+|localhost:[0-9]+`)

// sameModuloAddr: two strings equal once every HOST:PORT is masked.
func sameModuloAddr(a, b reflect.Value) bool {
	str := func(v reflect.Value) (string, bool) {
		if v.Kind() == reflect.Pointer {
			if v.IsNil() {
				return "", false
			}
			v = v.Elem()
		}
		if v.Kind() != reflect.String {
			return "", false
		}
		return addrRE.ReplaceAllString(v.String(), "HOST:PORT"), true
	}
	x, ok1 := str(a)
	y, ok2 := str(b)
	return ok1 && ok2 && x == y && x != ""
}

// disCompactedRetention: disgw's value is 604800000 (168 h), where Kafka's
// is another.
func disCompactedRetention(kafka, disgw reflect.Value) bool {
	str := func(v reflect.Value) string {
		if v.Kind() == reflect.Pointer {
			if v.IsNil() {
				return ""
			}
			v = v.Elem()
		}
		if v.Kind() != reflect.String {
			return ""
		}
		return v.String()
	}
	return str(disgw) == "604800000" && str(kafka) != "604800000"
}

func disgwLower(a, b reflect.Value) bool {
	x, ok1 := intOf(a)
	y, ok2 := intOf(b)
	return ok1 && ok2 && y < x
}

// issueAPIs are the APIs issue 13 asks disgw to serve: their absence from
// disgw's ApiVersions is a failure, not kept.
var issueAPIs = map[int16]bool{
	21: true, // DeleteRecords
	35: true, // DescribeLogDirs
	34: true, // AlterReplicaLogDirs
	43: true, // ElectLeaders
	45: true, // AlterPartitionReassignments
	46: true, // ListPartitionReassignments
	75: true, // DescribeTopicPartitions
	60: true, // DescribeCluster
	61: true, // DescribeProducers
}

// unservedOutsideIssue: an ApiVersions entry Kafka has and disgw lacks, for
// an API the issue does not ask for.
func unservedOutsideIssue(a, b reflect.Value) bool {
	if !a.IsValid() || b.IsValid() {
		return false
	}
	k := a.FieldByName("ApiKey")
	return k.IsValid() && !issueAPIs[int16(k.Int())]
}

// printKept prints the table of kept differences.
func printKept() string {
	var b strings.Builder
	for _, r := range keptRules {
		api := r.API
		if api == "" {
			api = "every API"
		}
		if r.MaxVer > 0 {
			api += fmt.Sprintf(" v0-%d", r.MaxVer)
		}
		if r.Backend != "" {
			api += " (" + r.Backend + ")"
		}
		fmt.Fprintf(&b, "  %-48s %-16s %-24s %s\n", r.Category, api, r.Path, r.Reason)
	}
	return b.String()
}

// disRetentionDefault keeps the differences that the DIS backend's 24-hour
// default retention makes (see its rule) and no others: Kafka's value
// 604800000 or null where disgw's is 86400000, DEFAULT_CONFIG (5) where
// disgw's is STATIC_BROKER_CONFIG (4: CreateTopics gives the number), IsDefault true where disgw's is false,
// and the log.retention.ms synonym disgw lists and Kafka does not.
func disRetentionDefault(kafka, disgw reflect.Value) bool {
	show := func(v reflect.Value) string {
		switch {
		case !v.IsValid():
			return "missing"
		case v.Kind() == reflect.Pointer && v.IsNil():
			return "null"
		case v.Kind() == reflect.Pointer:
			v = v.Elem()
		}
		if v.Kind() == reflect.Struct {
			return "present"
		}
		return fmt.Sprint(v.Interface())
	}
	switch [2]string{show(kafka), show(disgw)} {
	case [2]string{"604800000", "86400000"}, [2]string{"null", "86400000"},
		[2]string{"DEFAULT_CONFIG", "STATIC_BROKER_CONFIG"}, [2]string{"5", "4"}, [2]string{"true", "false"},
		[2]string{"missing", "present"}:
		return true
	}
	return false
}
