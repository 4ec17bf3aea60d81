// Package configs owns disgw's configuration: the Config struct, whose
// fields are the one source of every setting (key, default, allowed
// values, unit and description), loading it from a YAML file and DISGW_*
// environment variables, and validating it. Precedence is defaults < YAML
// file < environment < command-line flags; the flags themselves are parsed
// only by main, which hands explicitly set values to Config.Set.
//
// The settings table of docs/configuration.md, the example file
// configs/disgw.yaml and the defaults of the gateway.Config fields that
// mirror a setting (gateway/settings_defaults.go) are generated from Config
// by `go generate ./configs` (internal/settingsgen); a test fails when one
// of them is stale.
//
// It does not start anything and does not read files other than the one it
// is asked to load and, through Config.DISCredentials, the DIS credentials
// file. It imports neither gateway nor a backend: cmd/disgw maps a Config
// onto their options.
package configs

//go:generate go run gen_settings.go

import (
	"strings"
	"time"
)

// EnvPrefix starts the environment variable of every key: key listen is read
// from DISGW_LISTEN, log_level from DISGW_LOG_LEVEL.
const EnvPrefix = "DISGW_"

// Backends: BackendLocal is the embedded Pebble store, the default;
// BackendDIS is Huawei Cloud DIS through its REST API (disrest), set up by
// the dis_* keys.
const (
	BackendLocal = "local"
	BackendDIS   = "dis"
)

// DISMaxMessageBytes is the largest max.message.bytes on backend dis
// (disrest.MaxMessageBytes; configs imports no backend).
const DISMaxMessageBytes = 1_048_622

// MaxRequestEntries is the most entries one request may declare
// (kafkawire.MaxRequestEntries; configs imports nothing of ours, and a test
// in cmd/disgw checks the two agree): the largest per-request cap, the top
// of the range of max_request_topics, max_request_partitions and
// max_request_groups (a test checks their tags).
const MaxRequestEntries = 1 << 18

// Config is disgw's configuration, one field per setting. Each field is the
// one place its setting is written: the doc comment is its meaning (the
// docs table and the YAML example print it, without the leading field name
// and "is"; `code` and docs/PAGE.md references are kept), and the tags are
// the rest:
//
//   - yaml: the key, in the YAML file; its environment variable is
//     EnvPrefix plus the key in upper case (EnvVar).
//   - default: the default, written as Set reads it; absent means the zero
//     value.
//   - flag: the command-line flag of serve that sets it, without dashes
//     (main defines the flag).
//   - range: the numbers allowed, checked by Validate: "> X", ">= X",
//     "at least X" or "X to Y" (inclusive), then optionally "or -1" (any
//     negative value is also allowed: the key reads it as off or
//     unlimited), then optional free text; the problem reads
//     "VALUE must be RANGE".
//   - values: the values allowed, comma-separated.
//   - check: a named check of checks (a format such as HOST:PORT), then
//     optional free text added to its problems.
//   - unit: the unit of a number (bytes, connections, ...), for the docs.
//   - secret: "true" for a credential: Effective masks it.
//   - emptyenv: "true" for a key whose empty value means something other
//     than its default (admin_listen: no admin listener; advertise: the
//     bound address; listeners: one listener on listen): its environment
//     variable set to the empty string sets it empty. For every other key
//     an empty variable counts as unset (ApplyLookupEnv).
//   - gateway: which gateway.Config field the setting fills when it is not
//     the one of the same name: a path such as "Limits.MaxTopics", or "-"
//     for none (cmd/disgw maps it by code). cmd/disgw copies every other
//     setting onto the gateway.Config field of its name, when there is one,
//     and the gateway's defaults of those fields are generated from here.
//
// Tags on the fields rather than a separate table of descriptors: a new
// setting is one edit here, its Go field and its description cannot drift
// apart, and Set, Load, ApplyEnv and Effective read the fields by
// reflection as before. Checks that involve two settings stay code in
// Validate.
type Config struct {
	// Listen is the TCP address the Kafka listener binds, HOST:PORT; port
	// 0 picks a free port.
	Listen string `yaml:"listen" default:"127.0.0.1:9092" flag:"listen" check:"hostport"`
	// Advertise is the HOST:PORT given to clients in Metadata. Empty means
	// the address actually bound (127.0.0.1 when bound to 0.0.0.0); never
	// 0.0.0.0 or port 0.
	Advertise string `yaml:"advertise" flag:"advertise" check:"advertised" emptyenv:"true"`
	// ListenersList is Kafka's `listeners`: named listeners,
	// `NAME://HOST:PORT,...`, e.g.
	// `PLAINTEXT://127.0.0.1:9092,SASL_SSL://:9093`. Empty means one
	// PLAINTEXT listener on `listen`, advertising `advertise` (see
	// docs/security.md).
	ListenersList string `yaml:"listeners" emptyenv:"true"`
	// AdvertisedListeners is Kafka's `advertised.listeners`,
	// `NAME://HOST:PORT,...`: what Metadata, FindCoordinator and
	// DescribeCluster answer on each listener; a listener not named
	// advertises its bound address.
	AdvertisedListeners string `yaml:"advertised_listeners"`
	// ListenerSecurityProtocolMap is Kafka's
	// `listener.security.protocol.map`, `NAME:PROTOCOL,...` with PROTOCOL
	// PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL; a listener named after a
	// protocol needs no entry.
	ListenerSecurityProtocolMap string `yaml:"listener_security_protocol_map"`
	// TLSCertFile is the PEM certificate chain of the SSL and SASL_SSL
	// listeners, read again when it changes. TLS 1.2 is the minimum.
	TLSCertFile string `yaml:"tls_cert_file" gateway:"TLS.CertFile"`
	// TLSKeyFile is the PEM private key of that certificate, read again
	// when it changes; keep it 0600.
	TLSKeyFile string `yaml:"tls_key_file" gateway:"TLS.KeyFile"`
	// TLSClientCAFile is a PEM file of the CAs client certificates are
	// verified against (Kafka `ssl.truststore.location`).
	TLSClientCAFile string `yaml:"tls_client_ca_file" gateway:"TLS.ClientCAFile"`
	// TLSClientAuth is Kafka's `ssl.client.auth` on SSL listeners (SASL_SSL
	// listeners ask for no certificate, as Kafka ignores a broker-wide
	// `ssl.client.auth` there, KIP-684); a verified certificate on an SSL
	// listener makes the principal `User:` + its subject DN.
	TLSClientAuth string `yaml:"tls_client_auth" default:"none" values:"none,requested,required" gateway:"TLS.ClientAuth"`
	// SASLEnabledMechanisms is Kafka's `sasl.enabled.mechanisms` on the
	// SASL listeners.
	SASLEnabledMechanisms string `yaml:"sasl_enabled_mechanisms" default:"PLAIN,SCRAM-SHA-256,SCRAM-SHA-512" check:"mechanisms"`
	// SASLUsersFile is a file of initial SASL users, one a line:
	// `MECHANISM NAME PASSWORD`. PLAIN users are checked against it; a
	// SCRAM user's credential is stored salted and hashed in the backend at
	// start unless the user has one already. Refused when others may read
	// it.
	SASLUsersFile string `yaml:"sasl_users_file"`
	// SASLPlainAuthentication is what SASL PLAIN checks: `users`, the PLAIN
	// users of `sasl_users_file`, or `dis`, where the username and password
	// are a DIS AK and SK checked against DIS and the connection's DIS calls
	// are signed with them (backend `dis` only; see docs/security.md).
	SASLPlainAuthentication string `yaml:"sasl_plain_authentication" default:"users" values:"users,dis"`
	// DISPrincipalClients bounds, with `sasl_plain_authentication: dis`,
	// the DIS clients kept for principals' key pairs, least recently used
	// dropped first.
	DISPrincipalClients int64 `yaml:"dis_principal_clients" default:"1024" range:"at least 1" unit:"clients"`
	// DISPrincipalTTL is how long, with `sasl_plain_authentication: dis`, a
	// principal's signed check of a stream (GetCursor for reads,
	// DescribeStream for Metadata) is trusted before DIS is asked again:
	// meanwhile its reads are served from the gateway's shared read caches
	// and its Metadata answered.
	DISPrincipalTTL time.Duration `yaml:"dis_principal_ttl" default:"60s" range:"> 0"`
	// ConnectionsMaxReauth is Kafka's `connections.max.reauth.ms`: SASL
	// sessions last this long, then clients re-authenticate (KIP-368); 0:
	// they do not expire.
	ConnectionsMaxReauth time.Duration `yaml:"connections_max_reauth" default:"0s" range:">= 0 (0: sessions do not expire)" gateway:"SASL.MaxReauth"`
	// Data is the directory of the embedded store (created if missing,
	// mode 0700; every file in it is created 0600, and an older directory
	// keeps its modes). It must be missing, empty or a disgw store: a
	// directory holding other files (hidden ones and `lost+found` aside) is refused
	// at start.
	Data string `yaml:"data" default:"./data" flag:"data" check:"directory"`
	// Backend selects the backend: `local`, the embedded Pebble store, or
	// `dis`, Huawei Cloud DIS through its REST API, set up by the `dis_*`
	// keys (see docs/dis-backend.md and configs/dis.yaml).
	Backend string `yaml:"backend" default:"local" flag:"backend" values:"local,dis"`
	// DISEndpoint is the DIS endpoint URL, e.g.
	// `https://dis.cn-north-4.myhuaweicloud.com`; required with backend
	// `dis`.
	DISEndpoint string `yaml:"dis_endpoint" flag:"dis-endpoint"`
	// DISProjectID is the IAM project id of the region; required with
	// backend `dis` unless the credentials file gives `project_id`.
	DISProjectID string `yaml:"dis_project_id" flag:"dis-project-id"`
	// DISRegion is the DIS region, e.g. `cn-north-4` (informational).
	DISRegion string `yaml:"dis_region" flag:"dis-region"`
	// DISAK is the access key that signs DIS requests, with `dis_sk`; best
	// given as `DISGW_DIS_AK`. Never logged.
	DISAK string `yaml:"dis_ak" secret:"true"`
	// DISSK is the secret key of `dis_ak`; best given as `DISGW_DIS_SK`.
	// Never logged.
	DISSK string `yaml:"dis_sk" secret:"true"`
	// DISToken is an IAM token (`X-Auth-Token`) used when no AK is given;
	// best given as `DISGW_DIS_TOKEN`. Never logged.
	DISToken string `yaml:"dis_token" secret:"true"`
	// DISCredentialsFile is the Huawei Cloud SDK's credentials file (INI,
	// like `~/.huaweicloud/credentials`): `[basic]` with `ak`, `sk`,
	// optionally `security_token` and `project_id`; read at start only when
	// neither `dis_ak` nor `dis_token` is set. Its `project_id` stands in
	// for an empty `dis_project_id`. Its secrets are never logged (see
	// docs/dis-backend.md).
	DISCredentialsFile string `yaml:"dis_credentials_file" flag:"dis-credentials-file"`
	// DISRecordFormat is how Kafka records are stored in DIS, for topics
	// that do not set the topic config `dis.record.format`: `auto` (plain
	// where DIS can hold the record, else an envelope), `native` (never the
	// envelope; such records are refused) or `envelope` (always); see
	// docs/dis-backend.md.
	DISRecordFormat string `yaml:"dis_record_format" default:"auto" values:"auto,native,envelope" gateway:"DefaultRecordFormat"`
	// DISLinger is how long a partition's first waiting batch waits for
	// more: the batches arriving within it share one PutRecords (the DIS
	// Kafka Adapter's `linger.ms`); 0 sends at once.
	DISLinger time.Duration `yaml:"dis_linger" default:"50ms" range:">= 0 (0 sends at once)"`
	// DISBatchBytes caps the data bytes of one PutRecords (the adapter's
	// `batch.size`); waiting records that reach it are sent before the
	// linger ends. The default is DIS's limit for a COMMON stream.
	DISBatchBytes int32 `yaml:"dis_batch_bytes" default:"1048576" range:"1 to 5242880 (5 MiB, DIS's limit for an ADVANCED stream)" unit:"bytes"`
	// DISBatchCount caps the records of one PutRecords (the adapter's
	// `batch.count`); reaching it sends before the linger ends.
	DISBatchCount int32 `yaml:"dis_batch_count" default:"1000" range:"> 0" unit:"records"`
	// DISBufferBytes bounds the bytes of batches waiting for DIS (the
	// adapter's `buffer.memory`; a batch counts with its decoded records,
	// and a compressed one with its decompressed data); a produce beyond it
	// waits for room, at most 30 s, then gets `REQUEST_TIMED_OUT`.
	DISBufferBytes int32 `yaml:"dis_buffer_bytes" default:"33554432" range:"> 0" unit:"bytes"`
	// DISCompactionMaxKeys bounds the keys of compacted topics
	// (`cleanup.policy=compact`) the DIS backend indexes to keep every live
	// key (about 100 bytes of memory each); a produce with new keys beyond
	// it gets `INVALID_RECORD`.
	DISCompactionMaxKeys int32 `yaml:"dis_compaction_max_keys" default:"1000000" range:"> 0" unit:"keys"`
	// DISMetadataRefresh is how often, with backend `dis`, the gateway
	// lists DIS's streams (one ListStreams, and one DescribeStream only of
	// each stream new or changed since the last listing, or with partitions
	// left DELETED by a scale-down): the bound on how long a stream created,
	// deleted or scaled in DIS by anyone (another gateway node, DIS tools,
	// the console) takes to show in Metadata. Failed listings (DIS.4305 too
	// many requests among them) back off, doubling, up to 2 minutes.
	DISMetadataRefresh time.Duration `yaml:"dis_metadata_refresh" default:"5s" range:"at least 100ms (DIS limits its API's request rate)"`
	// DISRequestTimeout bounds one HTTP request to DIS. In cluster mode it
	// is also how long a new leader waits, beyond `cluster_lease`, before
	// it writes a partition that moved (a PutRecords its old leader sent is
	// applied by DIS within it or never; docs/cluster.md §4): a shorter one
	// shortens failover.
	DISRequestTimeout time.Duration `yaml:"dis_request_timeout" default:"30s" range:"> 0" gateway:"-"`
	// Cluster turns on cluster mode (backend `dis` only): several nodes in
	// front of one DIS project, each partition led and each group
	// coordinated by one of them, fenced through DIS's consumer groups (see
	// docs/cluster.md). Each node needs its own `node_id` and advertised
	// address. At start the node checks that DIS refuses a commit of a
	// stale group member and refuses to start otherwise.
	Cluster bool `yaml:"cluster" default:"false" gateway:"-"`
	// NodeID is this node's Kafka node id (broker id in Metadata); in
	// cluster mode unique among the nodes: a node that finds its id held by
	// another live node refuses to start.
	NodeID int32 `yaml:"node_id" default:"0" range:"0 to 1023" unit:"node id"`
	// ClusterHeartbeat is how often, in cluster mode, a node heartbeats to
	// DIS's consumer group of the nodes and reads the current view: the
	// bound on how late it learns of a new generation and its view.
	ClusterHeartbeat time.Duration `yaml:"cluster_heartbeat" default:"1s" range:"> 0"`
	// ClusterJoinWindow is the `rebalanceTimeoutMs` a node sends, in
	// cluster mode, with its JoinGroup: how long DIS waits for the nodes to
	// join a rebalance (DIS's documented window is about 20 s).
	ClusterJoinWindow time.Duration `yaml:"cluster_join_window" default:"3s" range:"> 0"`
	// ClusterSettle is how long, in cluster mode, the controller waits
	// after a rebalance for every node to publish its registry record
	// before it computes and writes the view; a node that publishes later
	// joins again.
	ClusterSettle time.Duration `yaml:"cluster_settle" default:"2s" range:"> 0"`
	// ClusterLease is how long, in cluster mode, a node may write to DIS
	// after sending its last lease renewal that DIS accepted (renewed every
	// third of it): a node cut off from DIS stops writing within it.
	ClusterLease time.Duration `yaml:"cluster_lease" default:"3s" range:"> 0"`
	// ClusterSecret is, in cluster mode, the key every node holds alike to
	// authenticate the admin writes it forwards to the controller
	// (docs/cluster.md §7). Empty (the default) derives it from `dis_sk`,
	// which the nodes of one DIS project share; with `dis_token` and no
	// secret, admin writes are not forwarded (a node other than the
	// controller answers them NOT_CONTROLLER).
	ClusterSecret string `yaml:"cluster_secret" secret:"true" gateway:"-"`
	// ClusterRebalanceInterval is how often at most, in cluster mode, the
	// controller starts a new generation because topics, partitions or
	// groups created since the view load one node above 1.1 times the mean.
	ClusterRebalanceInterval time.Duration `yaml:"cluster_rebalance_interval" default:"10m" range:"> 0"`
	// ClusterControlledShutdown makes a cluster-mode node, on SIGTERM or
	// SIGINT, leave the nodes' group first and serve on, owning nothing,
	// until the others' view without it is written (at most
	// `cluster_join_window` + `cluster_settle` + 2 `cluster_heartbeat` + 1s,
	// and half of `shutdown_grace`), as Kafka's
	// `controlled.shutdown.enable`: consumer groups it coordinated go on in
	// their generation at their next coordinator. The price: a restart
	// makes two rebalances of the nodes, its leave and its join, even when
	// it is quick enough for one (docs/cluster.md §8).
	ClusterControlledShutdown bool `yaml:"cluster_controlled_shutdown" default:"true" gateway:"-"`
	// LogLevel is the least level logged (to stderr).
	LogLevel string `yaml:"log_level" default:"info" flag:"log-level" values:"debug,info,warn,error"`

	// MaxFrameBytes caps one request frame (Kafka
	// `socket.request.max.bytes`); a larger one closes the connection.
	MaxFrameBytes int32 `yaml:"max_frame_bytes" default:"104857600" range:"> 0" unit:"bytes"`
	// IdleTimeout closes a connection with no request for this long (Kafka
	// `connections.max.idle.ms`).
	IdleTimeout time.Duration `yaml:"idle_timeout" default:"10m" range:"> 0"`
	// FrameReadTimeout bounds reading one request frame once its size has
	// arrived (and again after waiting for `queued_max_request_bytes`): a
	// client that starts a frame and stalls is closed after this. At most
	// `idle_timeout`.
	FrameReadTimeout time.Duration `yaml:"frame_read_timeout" default:"30s" range:"> 0 and at most idle_timeout"`
	// QueuedMaxRequestBytes bounds the memory of the requests being read,
	// decoded and answered, across all connections (Kafka
	// `queued.max.request.bytes`). Before reading a frame's body a
	// connection takes the request's cost and waits for room; it gives it
	// back once the response is written. A Produce costs twice its frame
	// plus 4 KiB per partition it declares; any other request a measured
	// multiple of its frame, what decoding and answering it can take
	// (`kafkawire.RequestCost`: 3 to 1032 times, with a ceiling for the
	// request types whose entries are capped). The last eighth is kept for
	// requests costing at most 1 MiB, so small requests are answered while
	// large ones wait; a request costing more than seven eighths waits to
	// run alone, and one costing more than three times that closes the
	// connection, as a frame over `max_frame_bytes` does. At least
	// `max_frame_bytes`·8/7.
	QueuedMaxRequestBytes int64 `yaml:"queued_max_request_bytes" default:"134217728" unit:"bytes"`
	// MaxConnections bounds the open client connections (Kafka
	// `max.connections`); one more is closed at once, logged and counted.
	MaxConnections int32 `yaml:"max_connections" default:"4096" range:"> 0" unit:"connections"`
	// MaxConnectionsPerIP bounds the open connections from one client
	// address (Kafka `max.connections.per.ip`); behind a load balancer that
	// hides client addresses, raise it.
	MaxConnectionsPerIP int32 `yaml:"max_connections_per_ip" default:"1024" range:"> 0" unit:"connections"`
	// AutoCreateTopics lets Metadata create unknown topics a client asks
	// for (Kafka `auto.create.topics.enable`).
	AutoCreateTopics bool `yaml:"auto_create_topics" default:"true"`
	// DefaultPartitions is the partition count of auto-created topics and
	// of CreateTopics asking for -1 (Kafka `num.partitions`).
	DefaultPartitions int32 `yaml:"default_partitions" default:"1" range:">= 1" unit:"partitions"`
	// DefaultRetention is `retention.ms` of new topics that do not set it.
	// 0 is the backend's default: `168h` on the embedded store (Kafka's
	// `log.retention.hours`), `24h` on DIS (DIS's default
	// `data_duration`). `-1` (any negative value) keeps data forever on the
	// embedded store; DIS keeps 24h to 168h, anything else is a startup
	// error with backend `dis`.
	DefaultRetention time.Duration `yaml:"default_retention" default:"0" check:"kafka-ms" gateway:"-"`
	// MaxMessageBytes is `max.message.bytes` of new topics: the largest
	// record batch accepted. With backend `dis` at most 1048622 (what DIS
	// can store per record, envelope included).
	MaxMessageBytes int32 `yaml:"max_message_bytes" default:"1048588" range:"> 0" unit:"bytes"`
	// MaxDecompressedMessageBytes is `max.decompressed.message.bytes` of
	// topics that do not set it: the most bytes one batch's records may
	// decompress to; Produce refuses a larger batch with `INVALID_RECORD`
	// having inflated no more than this (`max.message.bytes` stays the
	// limit of the compressed batch). At most
	// `decompression_budget_bytes`. The default, a hundred times Kafka's
	// default `max.request.size`, lets clients' batches of even very
	// compressible data pass.
	MaxDecompressedMessageBytes int64 `yaml:"max_decompressed_message_bytes" default:"104857600" range:"1 to 134217728 (128 MiB)" unit:"bytes"`
	// DecompressionBudgetBytes bounds the decompressed bytes all
	// connections hold at once: compressed batches being checked (as a
	// stream: their largest record) or decoded (records waiting for DIS,
	// until their PutRecords completes), the one batch ListOffsets by
	// timestamp decodes. A batch that finds no room waits until its
	// request's timeout, then gets `REQUEST_TIMED_OUT`.
	DecompressionBudgetBytes int64 `yaml:"decompression_budget_bytes" default:"268435456" range:"at least 1048576 (1 MiB)" unit:"bytes"`
	// MaxPartitions is the most partitions a topic may have; CreateTopics
	// and CreatePartitions asking for more get INVALID_PARTITIONS.
	MaxPartitions int32 `yaml:"max_partitions" default:"10000" range:"> 0" unit:"partitions"`
	// MaxRequestTopics is the most topics (DescribeConfigs resources,
	// coordinator keys) one request is served (Metadata, DeleteTopics,
	// CreateTopics, DescribeConfigs, and the topics of ListOffsets,
	// OffsetFetch, OffsetCommit, OffsetForLeaderEpoch); the others get
	// INVALID_REQUEST each (CreateTopics: POLICY_VIOLATION), with only their
	// name. Kafka has no such cap, and no client comes near the default (a
	// consumer of a 10 000-topic cluster names 10 000 topics). A request
	// declaring more than 262144 entries in all is refused and its
	// connection closed.
	MaxRequestTopics int32 `yaml:"max_request_topics" default:"50000" range:"1 to 262144 (a request declaring more entries is refused whole)" unit:"topics" gateway:"Limits.MaxTopics"`
	// MaxRequestPartitions is the most partitions one request is served,
	// summed over its topics (ListOffsets, OffsetFetch, OffsetCommit,
	// OffsetForLeaderEpoch); the others get INVALID_REQUEST each. Kafka has
	// no such cap.
	MaxRequestPartitions int32 `yaml:"max_request_partitions" default:"200000" range:"1 to 262144 (a request declaring more entries is refused whole)" unit:"partitions" gateway:"Limits.MaxPartitions"`
	// MaxRequestGroups is the most groups one request is served
	// (DescribeGroups, DeleteGroups, OffsetFetch v8+, FindCoordinator v4+
	// keys); the others get INVALID_REQUEST each. Kafka has no such cap.
	MaxRequestGroups int32 `yaml:"max_request_groups" default:"50000" range:"1 to 262144 (a request declaring more entries is refused whole)" unit:"groups" gateway:"Limits.MaxGroups"`
	// AutoCreateTopicsPerRequest is the most topics one Metadata request
	// auto-creates; the others get UNKNOWN_TOPIC_OR_PARTITION and a
	// throttle time, and the client retries (producers create one topic at
	// a time; Kafka Streams and Connect use CreateTopics, which this does
	// not limit).
	AutoCreateTopicsPerRequest int32 `yaml:"auto_create_topics_per_request" default:"100" range:"> 0 (auto_create_topics: false turns auto-creation off)" unit:"topics" gateway:"Limits.AutoCreatePerRequest"`
	// AutoCreateTopicsPerSecond is how many topics Metadata auto-creates
	// per second, across all clients (a token bucket holding at most
	// `max(this, auto_create_topics_per_request)`); the others as above.
	AutoCreateTopicsPerSecond float64 `yaml:"auto_create_topics_per_second" default:"20" range:"> 0" unit:"topics per second" gateway:"Limits.AutoCreatePerSecond"`
	// PartitionMutationsPerSecond is how many partitions CreateTopics and
	// CreatePartitions may create per second, across all clients (KIP-599's
	// controller mutation rate): a token bucket of ten seconds' worth; a
	// request is admitted while it is not empty, the others get
	// THROTTLING_QUOTA_EXCEEDED and a throttle time (Java clients retry).
	PartitionMutationsPerSecond float64 `yaml:"partition_mutations_per_second" default:"1000" range:"> 0" unit:"partitions per second" gateway:"Limits.PartitionMutationsPerSecond"`
	// FetchMaxBytes caps the record bytes of one Fetch response, whatever
	// the client asks (Kafka `fetch.max.bytes`); a larger first batch is
	// still returned whole.
	FetchMaxBytes int32 `yaml:"fetch_max_bytes" default:"57671680" range:"> 0" unit:"bytes"`
	// ShutdownGrace is how long, on SIGTERM or SIGINT, in-flight requests
	// may take before connections are closed.
	ShutdownGrace time.Duration `yaml:"shutdown_grace" default:"10s" range:"> 0"`
	// RetentionCheckInterval is how often the embedded store drops data
	// past its retention; `-1` disables the check.
	RetentionCheckInterval time.Duration `yaml:"retention_check_interval" default:"1m" range:"> 0, or -1 to disable the check"`
	// CleanerCheckInterval is how often the embedded store's log cleaner
	// looks for compacted topics to clean (Kafka `log.cleaner.backoff.ms`);
	// `-1` disables it.
	CleanerCheckInterval time.Duration `yaml:"cleaner_check_interval" default:"15s" range:"> 0, or -1 to disable the log cleaner"`
	// CleanerDedupeBufferBytes bounds the log cleaner's key map, 24 bytes
	// a key, allocated as a pass needs it (Kafka
	// `log.cleaner.dedupe.buffer.size`); a partition with more keys than it
	// holds is cleaned in several passes.
	CleanerDedupeBufferBytes int64 `yaml:"cleaner_dedupe_buffer_bytes" default:"134217728" range:"at least 1024 bytes" unit:"bytes"`
	// ProducerIDExpiration is how long an idempotent producer's state on a
	// partition (its dedupe window: the last five batches) is kept after
	// it last wrote there, on both backends (Kafka
	// `producer.id.expiration.ms`, broker-level, shown as such by
	// DescribeConfigs). A producer idle that long is forgotten, and its
	// next batch is accepted at any sequence, as Kafka accepts a producer
	// it has no state for: a retry arriving after it is written again. Keep
	// it longer than clients' `delivery.timeout.ms` (the Java client's
	// default is 2 minutes), see docs/limits.md.
	ProducerIDExpiration time.Duration `yaml:"producer_id_expiration" default:"24h" range:"> 0"`
	// MaxUnindexedBytes bounds the bytes of the embedded store's active
	// segments, summed over every topic, that no index on disk covers:
	// past it the store writes their index journals. A restart after a
	// crash (kill -9, power loss) scans at most this much of the segments,
	// plus the batches being written at the crash; a clean restart scans
	// nothing.
	MaxUnindexedBytes int64 `yaml:"max_unindexed_bytes" default:"67108864" range:"at least 1048576 (1 MiB)" unit:"bytes"`
	// StorageMinFreeBytes is the embedded store's low-water mark: below
	// this much free space on the data directory's filesystem it refuses
	// produces with KAFKA_STORAGE_ERROR (clients retry until their
	// delivery timeout) and `/readyz` answers 503, until the free space
	// is back above it; reads, offset commits and retention go on (as
	// Redpanda's `storage_min_free_bytes`; docs/operations.md, a full
	// disk). `0` sets no mark: only a write that finds the disk full
	// stops produces.
	StorageMinFreeBytes int64 `yaml:"storage_min_free_bytes" default:"268435456" range:">= 0 (0: no mark)" unit:"bytes"`
	// StorageBallastBytes is the size of the embedded store's ballast: a
	// file, `ballast` in the data directory, reserved at start and
	// deleted when a write finds the disk full (or a start finds less
	// free space than `storage_min_free_bytes`), so that metadata, offset
	// commits and a clean stop still have room; reserved again once the
	// space is back. `0` reserves none.
	StorageBallastBytes int64 `yaml:"storage_ballast_bytes" default:"67108864" range:">= 0 (0: no ballast)" unit:"bytes"`
	// GroupInitialRebalanceDelay is how long a new consumer group waits for
	// more members before its first rebalance (Kafka
	// `group.initial.rebalance.delay.ms`); `-1` means no delay.
	GroupInitialRebalanceDelay time.Duration `yaml:"group_initial_rebalance_delay" default:"3s" range:"> 0, or -1 for no delay"`
	// GroupMinSessionTimeout is the smallest session timeout JoinGroup
	// accepts (Kafka `group.min.session.timeout.ms`).
	GroupMinSessionTimeout time.Duration `yaml:"group_min_session_timeout" default:"6s" range:"> 0"`
	// GroupMaxSessionTimeout is the largest session timeout JoinGroup
	// accepts (Kafka `group.max.session.timeout.ms`); at least
	// `group_min_session_timeout`.
	GroupMaxSessionTimeout time.Duration `yaml:"group_max_session_timeout" default:"30m"`
	// GroupConsumerProtocol serves KIP-848's consumer group protocol
	// (`group.protocol=consumer`: ConsumerGroupHeartbeat and
	// ConsumerGroupDescribe, and the `group.version` 1 feature, advertised
	// by ApiVersions only when on), as
	// Kafka 4.4 does by default, with Kafka's settings (session 45 s,
	// heartbeat interval 5 s, assignors `uniform` and `range`; a group's
	// `consumer.session.timeout.ms` and `consumer.heartbeat.interval.ms`,
	// set with `kafka-configs --entity-type groups`, override the first
	// two for it); `false`
	// leaves clients the classic protocol only
	// (docs/consumer-protocol.md says what differs from Kafka).
	GroupConsumerProtocol bool `yaml:"group_consumer_protocol" default:"true" gateway:"ConsumerGroupProtocol"`
	// GroupConsumerMigrationPolicy is Kafka's
	// `group.consumer.migration.policy`: which online conversions between
	// a classic group with members and a consumer group with members are
	// allowed (`bidirectional`: a classic group becomes a consumer group
	// when a member restarts with `group.protocol=consumer`, and back when
	// its last such member leaves; `upgrade` or `downgrade`: one way only;
	// `disabled`: neither, and a classic member joining a consumer group
	// with members gets INCONSISTENT_GROUP_PROTOCOL; a refusal is logged
	// with the policy). Empty groups change type either way whatever
	// the policy (docs/consumer-protocol.md §8).
	GroupConsumerMigrationPolicy string `yaml:"group_consumer_migration_policy" default:"bidirectional" values:"bidirectional,upgrade,downgrade,disabled" gateway:"ConsumerGroupMigrationPolicy"`
	// OffsetsRetention deletes the committed offsets (the DIS app) of a
	// group that has stayed empty this long (Kafka
	// `offsets.retention.minutes`); a consumer group's (KIP-848) expire
	// one by one, each this long after its commit once no member
	// subscribes to its topic, as Kafka's do; `-1` keeps them forever.
	OffsetsRetention time.Duration `yaml:"offsets_retention" default:"168h" range:"> 0, or -1 to keep offsets forever"`
	// TransactionMaxTimeout is the largest `transaction.timeout.ms` a
	// transactional producer may ask for (Kafka
	// `transaction.max.timeout.ms`, 15 minutes); a larger one gets
	// INVALID_TRANSACTION_TIMEOUT. A transaction left open past its
	// producer's timeout is aborted.
	TransactionMaxTimeout time.Duration `yaml:"transaction_max_timeout" default:"15m" range:"> 0"`
	// TransactionalIDExpiration is how long a transactional id with no
	// transaction open is kept after its last use (Kafka
	// `transactional.id.expiration.ms`, 7 days); then it is forgotten and
	// its next InitProducerId gets a new producer id.
	TransactionalIDExpiration time.Duration `yaml:"transactional_id_expiration" default:"168h" range:"> 0"`

	// AdminListen is the address of the admin HTTP listener, HOST:PORT:
	// `/healthz`, `/readyz`, Prometheus `/metrics` and the read-only web
	// console at `/` (see docs/operations.md); empty turns it off.
	AdminListen string `yaml:"admin_listen" default:"127.0.0.1:9644" flag:"admin-listen" check:"hostport-or-empty (empty turns the admin listener off)" emptyenv:"true"`
	// AdminTLSCertFile is the PEM certificate chain of the admin listener:
	// with `admin_tls_key_file`, it serves HTTPS only.
	AdminTLSCertFile string `yaml:"admin_tls_cert_file"`
	// AdminTLSKeyFile is the PEM private key of `admin_tls_cert_file`.
	AdminTLSKeyFile string `yaml:"admin_tls_key_file"`
	// MetricsMaxTopics caps the distinct `topic` label values of the
	// metrics; further topics are counted under `__other`.
	MetricsMaxTopics int32 `yaml:"metrics_max_topics" default:"1000" range:"> 0" unit:"topics"`
	// MetricsMaxGroups caps the distinct `consumergroup` label values of the
	// lag metrics; further groups are counted under `__other`.
	MetricsMaxGroups int32 `yaml:"metrics_max_groups" default:"1000" range:"> 0" unit:"groups"`
	// MetricsLagInterval is how often group lag, partition offsets and the
	// console's data are read from the backend; `/metrics` serves the
	// cached values (a scrape never calls DIS).
	MetricsLagInterval time.Duration `yaml:"metrics_lag_interval" default:"15s" range:"> 0"`

	// Authorizer turns on authorization with Kafka's ACL model (Kafka
	// `authorizer.class.name` StandardAuthorizer): every request is checked
	// against the ACLs kept in the backend, which kafka-acls manages (see
	// docs/security.md). Off, everything is allowed and the ACL APIs answer
	// `SECURITY_DISABLED`.
	Authorizer bool `yaml:"authorizer" default:"false"`
	// SuperUsers are the principals that may do anything, `;`-separated
	// (Kafka `super.users`), e.g. `User:admin;User:ops`.
	SuperUsers string `yaml:"super_users" check:"principals" gateway:"-"`
	// AllowEveryoneIfNoACLFound allows an operation on a resource no ACL
	// names (Kafka `allow.everyone.if.no.acl.found`).
	AllowEveryoneIfNoACLFound bool `yaml:"allow_everyone_if_no_acl_found" default:"false" gateway:"AllowEveryoneIfNoACL"`
	// ACLRefreshInterval is how often each node reads the ACLs again from
	// the backend: a change made through another node applies within it.
	ACLRefreshInterval time.Duration `yaml:"acl_refresh_interval" default:"10s" range:"> 0"`
}

// SuperUserList returns SuperUsers as a list, without blanks.
func (c *Config) SuperUserList() []string {
	var out []string
	for _, u := range strings.Split(c.SuperUsers, ";") {
		if u = strings.TrimSpace(u); u != "" {
			out = append(out, u)
		}
	}
	return out
}

// RetentionDefault is the retention of new topics that do not set
// retention.ms: DefaultRetention, or when it is 0 the backend's default,
// 168h on the embedded store and 24h on DIS.
func (c Config) RetentionDefault() time.Duration {
	switch {
	case c.DefaultRetention != 0:
		return c.DefaultRetention
	case c.Backend == BackendDIS:
		return 24 * time.Hour
	}
	return 168 * time.Hour
}
