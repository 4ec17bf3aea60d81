// Package configs owns disgw's configuration: the Config struct, its
// defaults, loading it from a YAML file and DISGW_* environment variables,
// and validating it. Precedence is defaults < YAML file < environment <
// command-line flags; the flags themselves are parsed only by main, which
// hands explicitly set values to Config.Set.
//
// It does not start anything and does not read files other than the one it
// is asked to load and, through Config.DISCredentials, the DIS credentials
// file. It imports neither gateway nor a backend: cmd/disgw maps a Config
// onto their options.
package configs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/url"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
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

// RecordFormats are the values DISRecordFormat accepts.
var RecordFormats = []string{"auto", "native", "envelope"}

// Config is disgw's configuration. The yaml tag of each field is its key in
// the YAML file; its environment variable is EnvPrefix plus the key in upper
// case.
type Config struct {
	// Listen is the TCP address the Kafka listener binds, HOST:PORT.
	// Default 127.0.0.1:9092.
	Listen string `yaml:"listen"`
	// Advertise is the HOST:PORT given to clients in Metadata. Empty (the
	// default) means the address actually bound, with 127.0.0.1 for an
	// unspecified host. An explicit value must name a host other than
	// 0.0.0.0 or :: and a port 1-65535.
	Advertise string `yaml:"advertise"`
	// ListenersList is Kafka's listeners: named listeners,
	// "NAME://HOST:PORT,...", e.g. "PLAINTEXT://127.0.0.1:9092,SASL_SSL://:9093".
	// Empty (the default) means one PLAINTEXT listener on listen.
	ListenersList string `yaml:"listeners"`
	// AdvertisedListeners is Kafka's advertised.listeners,
	// "NAME://HOST:PORT,...": what Metadata and FindCoordinator answer on
	// each listener. A listener not named advertises its bound address.
	AdvertisedListeners string `yaml:"advertised_listeners"`
	// ListenerSecurityProtocolMap is Kafka's
	// listener.security.protocol.map, "NAME:PROTOCOL,..." with PROTOCOL
	// PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL. A listener named after a
	// protocol needs no entry.
	ListenerSecurityProtocolMap string `yaml:"listener_security_protocol_map"`
	// TLSCertFile and TLSKeyFile are the PEM certificate chain and
	// private key of the SSL and SASL_SSL listeners; they are read again
	// when they change. TLS 1.2 is the minimum.
	TLSCertFile string `yaml:"tls_cert_file"`
	TLSKeyFile  string `yaml:"tls_key_file"`
	// TLSClientCAFile is a PEM file of the CAs client certificates are
	// verified against (Kafka ssl.truststore.location).
	TLSClientCAFile string `yaml:"tls_client_ca_file"`
	// TLSClientAuth is Kafka's ssl.client.auth: none (the default),
	// requested or required. A verified certificate on an SSL listener
	// makes the principal "User:" + its subject DN.
	TLSClientAuth string `yaml:"tls_client_auth"`
	// SASLEnabledMechanisms is Kafka's sasl.enabled.mechanisms, a comma
	// list of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512. Default all three.
	SASLEnabledMechanisms string `yaml:"sasl_enabled_mechanisms"`
	// SASLUsersFile is a file of initial SASL users, one a line:
	// "MECHANISM NAME PASSWORD". PLAIN users are checked against it; a
	// SCRAM user's credential is stored salted and hashed in the backend
	// at start unless the user has one already. Refused when others may
	// read it.
	SASLUsersFile string `yaml:"sasl_users_file"`
	// SASLPlainAuthentication is what PLAIN checks: "users" (the default,
	// the PLAIN users of sasl_users_file) or "dis" (the username and
	// password are a DIS AK and SK, checked against DIS, and the
	// connection's DIS calls are signed with them; backend dis only).
	SASLPlainAuthentication string `yaml:"sasl_plain_authentication"`
	// DISPrincipalClients bounds the DIS clients kept for the key pairs
	// of sasl_plain_authentication dis, least recently used dropped
	// first. Default 1024.
	DISPrincipalClients int64 `yaml:"dis_principal_clients"`
	// DISPrincipalTTL is how long a principal's signed check of a stream
	// (sasl_plain_authentication dis) lets its reads be served from the
	// gateway's shared read caches and its Metadata answered before DIS
	// is asked again. Default 60s.
	DISPrincipalTTL time.Duration `yaml:"dis_principal_ttl"`
	// ConnectionsMaxReauth is Kafka's connections.max.reauth.ms: SASL
	// sessions last this long, then clients re-authenticate (KIP-368).
	// Default 0: sessions do not expire.
	ConnectionsMaxReauth time.Duration `yaml:"connections_max_reauth"`
	// Data is the directory of the embedded store. Default ./data.
	Data string `yaml:"data"`
	// Backend selects the backend: "local" (the embedded store, the
	// default) or "dis" (Huawei Cloud DIS, the dis_* keys).
	Backend string `yaml:"backend"`
	// DISEndpoint is the DIS endpoint URL, e.g.
	// https://dis.cn-north-4.myhuaweicloud.com. Required with backend dis.
	DISEndpoint string `yaml:"dis_endpoint"`
	// DISProjectID is the IAM project id of the region. Required with
	// backend dis.
	DISProjectID string `yaml:"dis_project_id"`
	// DISRegion is the DIS region, e.g. cn-north-4; informational.
	DISRegion string `yaml:"dis_region"`
	// DISAK and DISSK are the access key pair that signs DIS requests; best
	// given as DISGW_DIS_AK and DISGW_DIS_SK. Never logged.
	DISAK string `yaml:"dis_ak"`
	DISSK string `yaml:"dis_sk"`
	// DISToken is an IAM token (X-Auth-Token), used when no AK is given;
	// best given as DISGW_DIS_TOKEN. Never logged.
	DISToken string `yaml:"dis_token"`
	// DISCredentialsFile is the Huawei Cloud SDK's credentials file (the
	// INI file ~/.huaweicloud/credentials: [basic] with ak, sk and
	// optionally security_token and project_id), read at start when
	// neither dis_ak nor dis_token is given. Its project_id stands in for
	// an empty dis_project_id. Its secrets are never logged.
	DISCredentialsFile string `yaml:"dis_credentials_file"`
	// DISRecordFormat is how Kafka records are stored in DIS: auto (plain
	// where DIS can hold the record, else an envelope), native or
	// envelope. Default auto.
	DISRecordFormat string `yaml:"dis_record_format"`
	// DISLinger is how long a partition's first waiting batch waits for
	// more before its PutRecords is sent (the DIS Kafka Adapter's
	// linger.ms). Default 50ms; 0 sends at once.
	DISLinger time.Duration `yaml:"dis_linger"`
	// DISBatchBytes caps the data bytes of one PutRecords (the adapter's
	// batch.size); waiting records that reach it are sent before the
	// linger ends. Default 1048576 (1 MiB, DIS's limit for a COMMON
	// stream).
	DISBatchBytes int32 `yaml:"dis_batch_bytes"`
	// DISBatchCount caps the records of one PutRecords (the adapter's
	// batch.count). Default 1000.
	DISBatchCount int32 `yaml:"dis_batch_count"`
	// DISBufferBytes bounds the bytes of batches waiting for DIS (the
	// adapter's buffer.memory); a produce beyond it waits for room, at
	// most 30s, then fails with REQUEST_TIMED_OUT. Default 33554432
	// (32 MiB).
	DISBufferBytes int32 `yaml:"dis_buffer_bytes"`
	// DISCompactionMaxKeys bounds the keys of compacted topics
	// (cleanup.policy=compact) the DIS backend indexes to keep them (about
	// 100 bytes of memory each); a produce with new keys beyond it gets
	// INVALID_RECORD. Default 1000000.
	DISCompactionMaxKeys int32 `yaml:"dis_compaction_max_keys"`
	// DISMetadataRefresh is how often, with backend dis, the gateway lists
	// DIS's streams (one ListStreams, and a DescribeStream only of streams
	// new or changed since the last listing): the bound on how long a
	// stream created, deleted or scaled in DIS by anyone takes to show in
	// Metadata. Failed listings (DIS.4305 too many requests among them)
	// back off, doubling, up to 2 minutes. Default 5s.
	DISMetadataRefresh time.Duration `yaml:"dis_metadata_refresh"`
	// LogLevel is debug, info, warn or error. Default info.
	LogLevel string `yaml:"log_level"`

	// MaxFrameBytes caps one request frame, in bytes (Kafka
	// socket.request.max.bytes). Default 100 MiB.
	MaxFrameBytes int32 `yaml:"max_frame_bytes"`
	// IdleTimeout closes a connection with no request for this long (Kafka
	// connections.max.idle.ms). Default 10m.
	IdleTimeout time.Duration `yaml:"idle_timeout"`
	// FrameReadTimeout bounds reading one request frame once its size
	// has arrived: a client that starts a frame and stalls is closed after
	// this. Shorter than IdleTimeout. Default 30s.
	FrameReadTimeout time.Duration `yaml:"frame_read_timeout"`
	// QueuedMaxRequestBytes bounds the memory of requests being read,
	// decoded and answered across all connections, in bytes (Kafka
	// queued.max.request.bytes); a reader waits for room before it reads a
	// frame's body. At least max_frame_bytes·8/7. Default 134217728
	// (128 MiB).
	QueuedMaxRequestBytes int64 `yaml:"queued_max_request_bytes"`
	// MaxConnections bounds the open client connections (Kafka
	// max.connections). Default 4096.
	MaxConnections int32 `yaml:"max_connections"`
	// MaxConnectionsPerIP bounds the open connections from one client
	// address (Kafka max.connections.per.ip). Default 1024.
	MaxConnectionsPerIP int32 `yaml:"max_connections_per_ip"`
	// AutoCreateTopics lets Metadata create unknown requested topics (Kafka
	// auto.create.topics.enable). Default true.
	AutoCreateTopics bool `yaml:"auto_create_topics"`
	// DefaultPartitions is the partition count of auto-created topics and
	// of CreateTopics asking for -1 (Kafka num.partitions). Default 1.
	DefaultPartitions int32 `yaml:"default_partitions"`
	// DefaultRetention is retention.ms of new topics that do not set it.
	// Default (0): the backend's, 168h on the embedded store (Kafka's
	// log.retention.hours) and 24h on DIS (DIS's default data_duration). A
	// negative value (write -1) means unlimited (embedded store only: DIS
	// keeps 24 to 168 hours).
	DefaultRetention time.Duration `yaml:"default_retention"`
	// MaxMessageBytes is max.message.bytes of new topics: the largest record
	// batch, in bytes. Default 1048588 (Kafka's).
	MaxMessageBytes int32 `yaml:"max_message_bytes"`
	// MaxDecompressedMessageBytes is max.decompressed.message.bytes of
	// topics that do not set it: the most bytes one batch's records may
	// decompress to; Produce refuses a larger batch with INVALID_RECORD,
	// having inflated no more than this. Default 104857600 (100 MiB); at
	// most 134217728 (128 MiB) and decompression_budget_bytes.
	MaxDecompressedMessageBytes int64 `yaml:"max_decompressed_message_bytes"`
	// DecompressionBudgetBytes bounds the decompressed bytes that all
	// connections hold at once, in bytes (Produce checking or decoding
	// compressed batches, records waiting for DIS, ListOffsets by
	// timestamp). A batch that finds no room waits until its request's
	// timeout, then gets REQUEST_TIMED_OUT. Default 268435456 (256 MiB).
	DecompressionBudgetBytes int64 `yaml:"decompression_budget_bytes"`
	// MaxPartitions is the most partitions a topic may have (CreateTopics
	// and CreatePartitions asking for more get INVALID_PARTITIONS).
	// Default 10000.
	MaxPartitions int32 `yaml:"max_partitions"`
	// MaxRequestTopics is the most topics (config resources, coordinator
	// keys) one request is served; the others get an error each
	// (INVALID_REQUEST; POLICY_VIOLATION in CreateTopics). Kafka has no
	// such cap. Default 50000.
	MaxRequestTopics int32 `yaml:"max_request_topics"`
	// MaxRequestPartitions is the most partitions one request is served,
	// summed over its topics (ListOffsets, OffsetFetch, OffsetCommit,
	// OffsetForLeaderEpoch); the others get INVALID_REQUEST. Default 200000.
	MaxRequestPartitions int32 `yaml:"max_request_partitions"`
	// MaxRequestGroups is the most groups one request is served
	// (DescribeGroups, DeleteGroups, OffsetFetch v8+, FindCoordinator
	// v4+); the others get INVALID_REQUEST. Default 50000.
	MaxRequestGroups int32 `yaml:"max_request_groups"`
	// AutoCreateTopicsPerRequest is the most topics one Metadata request
	// may auto-create; the others get UNKNOWN_TOPIC_OR_PARTITION with a
	// throttle time (clients retry). Default 100.
	AutoCreateTopicsPerRequest int32 `yaml:"auto_create_topics_per_request"`
	// AutoCreateTopicsPerSecond is how many topics Metadata may
	// auto-create per second, across all clients (a token bucket of
	// max(this, auto_create_topics_per_request) tokens). Default 20.
	AutoCreateTopicsPerSecond float64 `yaml:"auto_create_topics_per_second"`
	// PartitionMutationsPerSecond is how many partitions CreateTopics and
	// CreatePartitions may create per second across all clients (KIP-599's
	// controller mutation rate; a bucket of ten seconds' worth); the others
	// get THROTTLING_QUOTA_EXCEEDED with a throttle time. Default 1000.
	PartitionMutationsPerSecond float64 `yaml:"partition_mutations_per_second"`
	// FetchMaxBytes caps the record bytes of one Fetch response, whatever
	// the client asks (Kafka fetch.max.bytes). Default 57671680 (55 MiB).
	FetchMaxBytes int32 `yaml:"fetch_max_bytes"`
	// ShutdownGrace is how long shutdown waits for in-flight requests before
	// closing connections. Default 10s.
	ShutdownGrace time.Duration `yaml:"shutdown_grace"`
	// RetentionCheckInterval is how often the embedded store drops data past
	// its retention. Default 1m. A negative value (write -1) disables the
	// check.
	RetentionCheckInterval time.Duration `yaml:"retention_check_interval"`
	// CleanerCheckInterval is how often the embedded store's log cleaner
	// looks for compacted topics to clean (Kafka log.cleaner.backoff.ms).
	// Default 15s. A negative value (write -1) disables the cleaner.
	CleanerCheckInterval time.Duration `yaml:"cleaner_check_interval"`
	// CleanerDedupeBufferBytes bounds the log cleaner's key map, in bytes,
	// 24 per key (Kafka log.cleaner.dedupe.buffer.size); a partition with
	// more keys is cleaned in several passes. Default 134217728 (128 MiB).
	CleanerDedupeBufferBytes int64 `yaml:"cleaner_dedupe_buffer_bytes"`
	// GroupInitialRebalanceDelay is how long a new consumer group waits for
	// more members before its first rebalance (Kafka
	// group.initial.rebalance.delay.ms). Default 3s; -1 means no delay.
	GroupInitialRebalanceDelay time.Duration `yaml:"group_initial_rebalance_delay"`
	// GroupMinSessionTimeout and GroupMaxSessionTimeout bound the session
	// timeouts JoinGroup accepts (Kafka group.min.session.timeout.ms and
	// group.max.session.timeout.ms). Defaults 6s and 30m.
	GroupMinSessionTimeout time.Duration `yaml:"group_min_session_timeout"`
	GroupMaxSessionTimeout time.Duration `yaml:"group_max_session_timeout"`
	// OffsetsRetention deletes the committed offsets (the DIS app) of a
	// group that has stayed empty this long (Kafka
	// offsets.retention.minutes). Default 168h (7 days); -1 keeps them.
	OffsetsRetention time.Duration `yaml:"offsets_retention"`

	// AdminListen is the address of the admin HTTP listener, HOST:PORT:
	// /healthz, /readyz, Prometheus /metrics and the read-only web console
	// at /. Default 127.0.0.1:9644; empty turns it off.
	AdminListen string `yaml:"admin_listen"`
	// AdminTLSCertFile and AdminTLSKeyFile, both set, make the admin
	// listener serve HTTPS with this PEM certificate chain and key.
	AdminTLSCertFile string `yaml:"admin_tls_cert_file"`
	AdminTLSKeyFile  string `yaml:"admin_tls_key_file"`
	// MetricsMaxTopics and MetricsMaxGroups cap the distinct topic and
	// group label values of the metrics; others are counted under the
	// label value "__other". Default 1000 each.
	MetricsMaxTopics int32 `yaml:"metrics_max_topics"`
	MetricsMaxGroups int32 `yaml:"metrics_max_groups"`
	// MetricsLagInterval is how often consumer-group lag and partition
	// offsets are read from the backend for /metrics and the console (a
	// scrape reads the cached values, never DIS). Default 15s.
	MetricsLagInterval time.Duration `yaml:"metrics_lag_interval"`

	// Authorizer turns on authorization with Kafka's ACL model (Kafka
	// authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer):
	// every request is checked against the ACLs kept in the backend
	// (kafka-acls manages them). Default false: everything is allowed and
	// the ACL APIs answer SECURITY_DISABLED.
	Authorizer bool `yaml:"authorizer"`
	// SuperUsers are the principals that may do anything, separated by
	// ';' as Kafka's super.users: "User:admin;User:ops". Default none.
	SuperUsers string `yaml:"super_users"`
	// AllowEveryoneIfNoACLFound allows an operation on a resource no ACL
	// names (Kafka allow.everyone.if.no.acl.found). Default false.
	AllowEveryoneIfNoACLFound bool `yaml:"allow_everyone_if_no_acl_found"`
	// ACLRefreshInterval is how often each node reads the ACLs again from
	// the backend, so a change made through another node applies within
	// it. Default 10s.
	ACLRefreshInterval time.Duration `yaml:"acl_refresh_interval"`
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

// MaxRequestEntries is the most entries one request may declare
// (kafkawire.MaxRequestEntries; configs imports nothing of ours, and a test
// in cmd/disgw checks the two agree): the largest per-request cap.
const MaxRequestEntries = 1 << 18

// Default returns the defaults listed on Config. The keys that mirror a
// gateway setting have the gateway's defaults (gateway.DefaultConfig); a
// test in cmd/disgw checks that the two agree.
func Default() Config {
	return Config{
		Listen:                  "127.0.0.1:9092",
		Advertise:               "",
		TLSClientAuth:           "none",
		SASLEnabledMechanisms:   "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
		SASLPlainAuthentication: SASLPlainUsers,
		DISPrincipalClients:     1024,
		DISPrincipalTTL:         60 * time.Second,
		Data:                    "./data",
		Backend:                 BackendLocal,
		DISRecordFormat:         "auto",
		DISLinger:               50 * time.Millisecond,
		DISBatchBytes:           1 << 20,
		DISBatchCount:           1000,
		DISBufferBytes:          32 << 20,
		DISCompactionMaxKeys:    1_000_000,
		DISMetadataRefresh:      5 * time.Second,
		LogLevel:                "info",
		MaxFrameBytes:           100 << 20,
		IdleTimeout:             10 * time.Minute,
		FrameReadTimeout:        30 * time.Second,
		QueuedMaxRequestBytes:   128 << 20,
		MaxConnections:          4096,
		MaxConnectionsPerIP:     1024,
		AutoCreateTopics:        true,
		DefaultPartitions:       1,
		DefaultRetention:        0, // the backend's: see RetentionDefault
		MaxMessageBytes:         1048588,
		// Mirrors gateway.DefaultMaxDecompressedMessageBytes and
		// gateway.DefaultDecompressionBudgetBytes.
		MaxDecompressedMessageBytes: 100 << 20,
		DecompressionBudgetBytes:    256 << 20,
		ShutdownGrace:               10 * time.Second,
		RetentionCheckInterval:      time.Minute,
		CleanerCheckInterval:        15 * time.Second,
		CleanerDedupeBufferBytes:    128 << 20,
		MaxPartitions:               10000,

		MaxRequestTopics:            50_000,
		MaxRequestPartitions:        200_000,
		MaxRequestGroups:            50_000,
		AutoCreateTopicsPerRequest:  100,
		AutoCreateTopicsPerSecond:   20,
		PartitionMutationsPerSecond: 1000,
		FetchMaxBytes:               55 << 20,

		GroupInitialRebalanceDelay: 3 * time.Second,
		GroupMinSessionTimeout:     6 * time.Second,
		GroupMaxSessionTimeout:     30 * time.Minute,
		OffsetsRetention:           7 * 24 * time.Hour,

		ACLRefreshInterval: 10 * time.Second,
		AdminListen:        "127.0.0.1:9644",
		MetricsMaxTopics:   1000,
		MetricsMaxGroups:   1000,
		MetricsLagInterval: 15 * time.Second,
	}
}

// Keys returns every configuration key, in the order of Config's fields.
func Keys() []string {
	t := reflect.TypeFor[Config]()
	keys := make([]string, 0, t.NumField())
	for i := range t.NumField() {
		keys = append(keys, yamlKey(t.Field(i)))
	}
	return keys
}

// EnvVar returns the environment variable of key: DISGW_ and the key in
// upper case.
func EnvVar(key string) string { return EnvPrefix + strings.ToUpper(key) }

func yamlKey(f reflect.StructField) string {
	k, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	return k
}

// field returns the field of c named by key.
func (c *Config) field(key string) (reflect.Value, bool) {
	v := reflect.ValueOf(c).Elem()
	t := v.Type()
	for i := range t.NumField() {
		if yamlKey(t.Field(i)) == key {
			return v.Field(i), true
		}
	}
	return reflect.Value{}, false
}

var durationType = reflect.TypeFor[time.Duration]()

// Set parses value as the type of key's field and stores it. Durations are
// Go durations ("10m", "168h") or a negative integer of nanoseconds ("-1"),
// which the keys that allow it read as unlimited or disabled; booleans are
// those of strconv.ParseBool. main uses it for the flags set on the command
// line.
func (c *Config) Set(key, value string) error {
	f, ok := c.field(key)
	if !ok {
		return fmt.Errorf("unknown key %q", key)
	}
	switch {
	case f.Type() == durationType:
		d, err := parseDuration(value)
		if err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
		f.SetInt(int64(d))
	case f.Kind() == reflect.String:
		f.SetString(value)
	case f.Kind() == reflect.Bool:
		b, err := strconv.ParseBool(strings.TrimSpace(value))
		if err != nil {
			return fmt.Errorf("%s: %q is not a boolean (true or false)", key, value)
		}
		f.SetBool(b)
	case f.Kind() == reflect.Int32:
		n, err := strconv.ParseInt(strings.TrimSpace(value), 10, 32)
		if err != nil {
			return fmt.Errorf("%s: %q is not a 32-bit integer", key, value)
		}
		f.SetInt(n)
	case f.Kind() == reflect.Int64:
		n, err := strconv.ParseInt(strings.TrimSpace(value), 10, 64)
		if err != nil {
			return fmt.Errorf("%s: %q is not an integer", key, value)
		}
		f.SetInt(n)
	case f.Kind() == reflect.Float64:
		n, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			return fmt.Errorf("%s: %q is not a number", key, value)
		}
		f.SetFloat(n)
	default:
		panic(fmt.Sprintf("configs: key %s has unsupported type %s", key, f.Type()))
	}
	return nil
}

// parseDuration reads a Go duration, or an integer, which must be negative
// ("-1"): a bare positive number is refused because its unit would be a guess.
// "0" is read as 0 for Validate to judge.
func parseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n > 0 {
			return 0, fmt.Errorf("%q has no unit; write a duration such as \"10s\", \"10m\" or \"168h\"", s)
		}
		return time.Duration(n), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration such as \"10s\", \"10m\" or \"168h\"", s)
	}
	return d, nil
}

// Load reads the YAML file at path over the defaults. Keys absent from the
// file keep their defaults; an unknown key is an error, as is more than one
// document. An empty file yields the defaults.
func Load(path string) (Config, error) {
	c := Default()
	b, err := os.ReadFile(path)
	if err != nil {
		return c, fmt.Errorf("config: %w", err)
	}
	if err := c.decodeYAML(b); err != nil {
		return c, fmt.Errorf("config %s: %w", path, err)
	}
	return c, nil
}

// decodeYAML applies the YAML document in b to c, checking every key.
func (c *Config) decodeYAML(b []byte) error {
	dec := yaml.NewDecoder(bytes.NewReader(b))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil // empty file
		}
		return err
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return errors.New("more than one YAML document")
	}
	if len(doc.Content) == 0 {
		return nil
	}
	root := doc.Content[0]
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		return nil // only comments
	}
	if root.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: the file must be a mapping of keys to values", root.Line)
	}
	var errs []error
	seen := make(map[string]bool)
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if seen[k.Value] {
			errs = append(errs, fmt.Errorf("line %d: key %q given twice", k.Line, k.Value))
			continue
		}
		seen[k.Value] = true
		f, ok := c.field(k.Value)
		if !ok {
			errs = append(errs, fmt.Errorf("line %d: unknown key %q (known keys: %s)", k.Line, k.Value, strings.Join(Keys(), ", ")))
			continue
		}
		if v.Kind != yaml.ScalarNode {
			errs = append(errs, fmt.Errorf("line %d: %s: want a single value", v.Line, k.Value))
			continue
		}
		if v.Tag == "!!null" {
			if f.Kind() == reflect.String {
				f.SetString("") // "advertise:" with no value means empty
				continue
			}
			errs = append(errs, fmt.Errorf("line %d: %s: no value", v.Line, k.Value))
			continue
		}
		if err := c.Set(k.Value, v.Value); err != nil {
			errs = append(errs, fmt.Errorf("line %d: %w", v.Line, err))
		}
	}
	return errors.Join(errs...)
}

// ApplyEnv sets each key whose environment variable (EnvVar) getenv returns
// non-empty. It returns every bad value at once.
func (c *Config) ApplyEnv(getenv func(string) string) error {
	var errs []error
	for _, k := range Keys() {
		name := EnvVar(k)
		v := getenv(name)
		if v == "" {
			continue
		}
		if err := c.Set(k, v); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// LogLevels are the values LogLevel accepts.
var LogLevels = []string{"debug", "info", "warn", "error"}

// Validate returns every problem of c at once, joined.
func (c Config) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, args...)))
	}
	if err := checkHostPort(c.Listen, false); err != nil {
		bad("listen", "%q: %v", c.Listen, err)
	}
	if c.Advertise != "" {
		if err := checkHostPort(c.Advertise, true); err != nil {
			bad("advertise", "%q: %v", c.Advertise, err)
		}
	}
	c.validateSecurity(bad)
	if strings.TrimSpace(c.Data) == "" {
		bad("data", "must name a directory")
	}
	switch c.Backend {
	case BackendLocal:
	case BackendDIS:
		if strings.TrimSpace(c.DISEndpoint) == "" {
			bad("dis_endpoint", "is required with backend dis (e.g. https://dis.cn-north-4.myhuaweicloud.com)")
		} else if u, err := url.Parse(c.DISEndpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad("dis_endpoint", "%q is not an http:// or https:// URL with a host (e.g. https://dis.cn-north-4.myhuaweicloud.com)", c.DISEndpoint)
		}
		// The credentials file is read (and may give the project id) only
		// when neither dis_ak nor dis_token is given.
		fromFile := c.DISAK == "" && c.DISToken == "" && c.DISCredentialsFile != ""
		if strings.TrimSpace(c.DISProjectID) == "" && !fromFile {
			if c.DISCredentialsFile != "" {
				bad("dis_project_id", "is required with backend dis: dis_credentials_file (and its project_id) is not read when dis_ak or dis_token is given")
			} else {
				bad("dis_project_id", "is required with backend dis (or project_id in dis_credentials_file)")
			}
		}
		if (c.DISAK == "") != (c.DISSK == "") {
			bad("dis_ak", "dis_ak and dis_sk go together (DISGW_DIS_AK, DISGW_DIS_SK)")
		}
		if c.DISAK == "" && c.DISToken == "" && c.DISCredentialsFile == "" {
			bad("dis_ak", "backend dis needs credentials: DISGW_DIS_AK and DISGW_DIS_SK, DISGW_DIS_TOKEN, or dis_credentials_file")
		}
	default:
		bad("backend", "%q is not one of %q, %q", c.Backend, BackendLocal, BackendDIS)
	}
	if !slices.Contains(RecordFormats, c.DISRecordFormat) {
		bad("dis_record_format", "%q is not one of %s", c.DISRecordFormat, strings.Join(RecordFormats, ", "))
	}
	if c.DISLinger < 0 {
		bad("dis_linger", "%v must be >= 0 (0 sends at once)", c.DISLinger)
	}
	if c.DISBatchBytes <= 0 || c.DISBatchBytes > 5<<20 {
		bad("dis_batch_bytes", "%d must be 1 to 5242880 (5 MiB, DIS's limit for an ADVANCED stream)", c.DISBatchBytes)
	}
	if c.DISBatchCount <= 0 {
		bad("dis_batch_count", "%d must be > 0", c.DISBatchCount)
	}
	if c.DISCompactionMaxKeys <= 0 {
		bad("dis_compaction_max_keys", "%d must be > 0", c.DISCompactionMaxKeys)
	}
	if c.DISMetadataRefresh < 100*time.Millisecond {
		bad("dis_metadata_refresh", "%v must be at least 100ms (DIS limits its API's request rate)", c.DISMetadataRefresh)
	}
	if c.DISBufferBytes <= 0 {
		bad("dis_buffer_bytes", "%d must be > 0", c.DISBufferBytes)
	}
	if !slices.Contains(LogLevels, c.LogLevel) {
		bad("log_level", "%q is not one of %s", c.LogLevel, strings.Join(LogLevels, ", "))
	}
	if c.MaxFrameBytes <= 0 {
		bad("max_frame_bytes", "%d must be > 0", c.MaxFrameBytes)
	}
	if c.IdleTimeout <= 0 {
		bad("idle_timeout", "%v must be > 0", c.IdleTimeout)
	}
	if c.FrameReadTimeout <= 0 || c.IdleTimeout > 0 && c.FrameReadTimeout > c.IdleTimeout {
		bad("frame_read_timeout", "%v must be > 0 and at most idle_timeout", c.FrameReadTimeout)
	}
	if min := (int64(c.MaxFrameBytes)*8 + 6) / 7; c.QueuedMaxRequestBytes < min {
		bad("queued_max_request_bytes", "%d must be at least max_frame_bytes·8/7 = %d (large requests may use seven eighths of it)", c.QueuedMaxRequestBytes, min)
	}
	if c.MaxConnections <= 0 {
		bad("max_connections", "%d must be > 0", c.MaxConnections)
	}
	if c.MaxConnectionsPerIP <= 0 {
		bad("max_connections_per_ip", "%d must be > 0", c.MaxConnectionsPerIP)
	}
	if c.DefaultPartitions <= 0 {
		bad("default_partitions", "%d must be >= 1", c.DefaultPartitions)
	}
	if c.DefaultRetention > 0 && c.DefaultRetention < time.Millisecond {
		bad("default_retention", "%v is below Kafka's unit of 1ms", c.DefaultRetention)
	}
	if r := c.RetentionDefault(); c.Backend == BackendDIS && (r < 24*time.Hour || r > 168*time.Hour) {
		bad("default_retention", "%v: DIS keeps data 24h to 168h", r)
	}
	if c.MaxMessageBytes <= 0 {
		bad("max_message_bytes", "%d must be > 0", c.MaxMessageBytes)
	} else if c.Backend == BackendDIS && c.MaxMessageBytes > DISMaxMessageBytes {
		bad("max_message_bytes", "%d: with backend dis at most %d (DIS stores at most 1 MiB per record, envelope included)", c.MaxMessageBytes, DISMaxMessageBytes)
	}
	if c.DecompressionBudgetBytes < 1<<20 {
		bad("decompression_budget_bytes", "%d must be at least 1048576 (1 MiB)", c.DecompressionBudgetBytes)
	}
	if c.MaxDecompressedMessageBytes <= 0 || c.MaxDecompressedMessageBytes > 128<<20 {
		bad("max_decompressed_message_bytes", "%d must be 1 to 134217728 (128 MiB)", c.MaxDecompressedMessageBytes)
	} else if c.MaxDecompressedMessageBytes > c.DecompressionBudgetBytes {
		bad("max_decompressed_message_bytes", "%d is more than decompression_budget_bytes %d: such a batch could never be decoded", c.MaxDecompressedMessageBytes, c.DecompressionBudgetBytes)
	}
	if c.ShutdownGrace <= 0 {
		bad("shutdown_grace", "%v must be > 0", c.ShutdownGrace)
	}
	if c.MaxPartitions <= 0 {
		bad("max_partitions", "%d must be > 0", c.MaxPartitions)
	}
	for _, l := range []struct {
		key string
		n   int32
	}{{"max_request_topics", c.MaxRequestTopics}, {"max_request_partitions", c.MaxRequestPartitions}, {"max_request_groups", c.MaxRequestGroups}} {
		if l.n <= 0 || l.n > MaxRequestEntries {
			bad(l.key, "%d must be 1 to %d (a request declaring more entries is refused whole)", l.n, MaxRequestEntries)
		}
	}
	if c.AutoCreateTopicsPerRequest <= 0 {
		bad("auto_create_topics_per_request", "%d must be > 0 (auto_create_topics: false turns auto-creation off)", c.AutoCreateTopicsPerRequest)
	}
	if !(c.AutoCreateTopicsPerSecond > 0) || math.IsInf(c.AutoCreateTopicsPerSecond, 0) {
		bad("auto_create_topics_per_second", "%v must be a number > 0", c.AutoCreateTopicsPerSecond)
	}
	if !(c.PartitionMutationsPerSecond > 0) || math.IsInf(c.PartitionMutationsPerSecond, 0) {
		bad("partition_mutations_per_second", "%v must be a number > 0", c.PartitionMutationsPerSecond)
	}
	if c.FetchMaxBytes <= 0 {
		bad("fetch_max_bytes", "%d must be > 0", c.FetchMaxBytes)
	}
	if c.CleanerCheckInterval == 0 {
		bad("cleaner_check_interval", "must be > 0, or -1 to disable the log cleaner")
	}
	if c.CleanerDedupeBufferBytes < 1<<10 {
		bad("cleaner_dedupe_buffer_bytes", "must be at least 1024 bytes")
	}
	if c.RetentionCheckInterval == 0 {
		bad("retention_check_interval", "must be > 0, or -1 to disable the check")
	}
	if c.GroupInitialRebalanceDelay == 0 {
		bad("group_initial_rebalance_delay", "must be > 0, or -1 for no delay")
	}
	if c.GroupMinSessionTimeout <= 0 {
		bad("group_min_session_timeout", "%v must be > 0", c.GroupMinSessionTimeout)
	}
	if c.GroupMaxSessionTimeout < c.GroupMinSessionTimeout {
		bad("group_max_session_timeout", "%v is below group_min_session_timeout %v", c.GroupMaxSessionTimeout, c.GroupMinSessionTimeout)
	}
	for _, u := range c.SuperUserList() {
		if typ, name, ok := strings.Cut(u, ":"); !ok || typ == "" || name == "" {
			bad("super_users", "%q is not a principal TYPE:NAME such as User:admin (separate several with ';')", u)
		}
	}
	if c.ACLRefreshInterval <= 0 {
		bad("acl_refresh_interval", "must be > 0")
	}
	if c.OffsetsRetention == 0 {
		bad("offsets_retention", "must be > 0, or -1 to keep offsets forever")
	}
	if c.AdminListen != "" {
		if err := checkHostPort(c.AdminListen, false); err != nil {
			bad("admin_listen", "%q: %v (empty turns the admin listener off)", c.AdminListen, err)
		}
	}
	if (c.AdminTLSCertFile == "") != (c.AdminTLSKeyFile == "") {
		bad("admin_tls_cert_file", "admin_tls_cert_file and admin_tls_key_file go together")
	}
	if c.MetricsMaxTopics <= 0 {
		bad("metrics_max_topics", "%d must be > 0", c.MetricsMaxTopics)
	}
	if c.MetricsMaxGroups <= 0 {
		bad("metrics_max_groups", "%d must be > 0", c.MetricsMaxGroups)
	}
	if c.MetricsLagInterval <= 0 {
		bad("metrics_lag_interval", "%v must be > 0", c.MetricsLagInterval)
	}
	return errors.Join(errs...)
}

// checkHostPort checks HOST:PORT. An advertised address needs a host other
// than an unspecified one and a port 1-65535; a listen address may leave the
// host empty or unspecified and use port 0 (any free port).
func checkHostPort(addr string, advertised bool) error {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return errors.New("want HOST:PORT")
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 0 || port > 65535 {
		return fmt.Errorf("port %q is not a number 0-65535", portStr)
	}
	if !advertised {
		return nil
	}
	if port == 0 {
		return errors.New("port 0 cannot be advertised; give the port clients connect to")
	}
	if host == "" {
		return errors.New("host is empty; give the host clients connect to")
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		return fmt.Errorf("%s cannot be advertised; give the host clients connect to", host)
	}
	return nil
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
