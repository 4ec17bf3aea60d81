package configs

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func writeFile(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "disgw.yaml")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func envMap(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestDefaultIsValid(t *testing.T) {
	t.Parallel()
	if err := Default().Validate(); err != nil {
		t.Fatalf("Default().Validate() = %v", err)
	}
}

// The example file lists every key at its default.
func TestExampleFileIsDefault(t *testing.T) {
	t.Parallel()
	c, err := Load("disgw.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if c != Default() {
		t.Fatalf("disgw.yaml = %+v\nwant Default() = %+v", c, Default())
	}
	b, err := os.ReadFile("disgw.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range Keys() {
		if !strings.Contains(string(b), "\n"+k+":") {
			t.Errorf("disgw.yaml does not set key %s", k)
		}
	}
}

// The settings table (docs/configuration.md, generated) documents every key
// and its environment variable.
func TestREADMEDocumentsEveryKey(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range Keys() {
		if !strings.Contains(string(b), "`"+k+"`") || !strings.Contains(string(b), "`"+EnvVar(k)+"`") {
			t.Errorf("docs/configuration.md does not document key %s and %s", k, EnvVar(k))
		}
	}
}

func TestPrecedence(t *testing.T) {
	t.Parallel()
	file := writeFile(t, `
listen: 127.0.0.1:1111
data: /from/file
log_level: warn
idle_timeout: 5m
default_retention: -1
`)
	tests := []struct {
		name  string
		env   map[string]string
		flags map[string]string
		want  func(*Config)
	}{
		{
			name: "file over defaults",
			want: func(c *Config) {
				c.Listen = "127.0.0.1:1111"
				c.Data = "/from/file"
				c.LogLevel = "warn"
				c.IdleTimeout = 5 * time.Minute
				c.DefaultRetention = -1
			},
		},
		{
			name: "env over file",
			env: map[string]string{
				"DISGW_LISTEN":             "127.0.0.1:2222",
				"DISGW_LOG_LEVEL":          "debug",
				"DISGW_AUTO_CREATE_TOPICS": "false",
				"DISGW_DEFAULT_RETENTION":  "24h",
				"DISGW_MAX_MESSAGE_BYTES":  "2000000",
				"DISGW_DATA":               "", // empty means unset

				"DISGW_MAX_REQUEST_TOPICS":            "5000",
				"DISGW_AUTO_CREATE_TOPICS_PER_SECOND": "2.5",
			},
			want: func(c *Config) {
				c.MaxRequestTopics, c.AutoCreateTopicsPerSecond = 5000, 2.5
				c.Listen = "127.0.0.1:2222"
				c.Data = "/from/file"
				c.LogLevel = "debug"
				c.IdleTimeout = 5 * time.Minute
				c.AutoCreateTopics = false
				c.DefaultRetention = 24 * time.Hour
				c.MaxMessageBytes = 2000000
			},
		},
		{
			name:  "flag over env and file",
			env:   map[string]string{"DISGW_LISTEN": "127.0.0.1:2222", "DISGW_DATA": "/from/env"},
			flags: map[string]string{"listen": "127.0.0.1:3333", "advertise": "kafka.example:9092"},
			want: func(c *Config) {
				c.Listen = "127.0.0.1:3333"
				c.Advertise = "kafka.example:9092"
				c.Data = "/from/env"
				c.LogLevel = "warn"
				c.IdleTimeout = 5 * time.Minute
				c.DefaultRetention = -1
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := Load(file)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.ApplyEnv(envMap(tc.env)); err != nil {
				t.Fatal(err)
			}
			for k, v := range tc.flags {
				if err := c.Set(k, v); err != nil {
					t.Fatal(err)
				}
			}
			want := Default()
			tc.want(&want)
			if c != want {
				t.Fatalf("got  %+v\nwant %+v", c, want)
			}
			if err := c.Validate(); err != nil {
				t.Fatalf("Validate() = %v", err)
			}
		})
	}
}

func TestLoadErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		text  string
		wants []string // substrings of the error
	}{
		{"unknown keys", "listen: 127.0.0.1:1\nlisten_addr: x\nfoo: 1\n", []string{`line 2: unknown key "listen_addr"`, `line 3: unknown key "foo"`}},
		{"duplicate key", "data: a\ndata: b\n", []string{`line 2: key "data" given twice`}},
		{"bad duration", "idle_timeout: soon\n", []string{"line 1: idle_timeout:", `"soon" is not a duration`}},
		{"duration without unit", "shutdown_grace: 10\n", []string{"shutdown_grace:", "has no unit"}},
		{"bad bool", "auto_create_topics: maybe\n", []string{"auto_create_topics:", "not a boolean"}},
		{"bad int", "default_partitions: many\n", []string{"default_partitions:", "not a 32-bit integer"}},
		{"not a mapping", "- listen\n", []string{"must be a mapping"}},
		{"nested value", "listen:\n  host: x\n", []string{"listen: want a single value"}},
		{"two documents", "data: a\n---\ndata: b\n", []string{"more than one YAML document"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := Load(writeFile(t, tc.text))
			if err == nil {
				t.Fatal("Load succeeded, want an error")
			}
			for _, w := range tc.wants {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestLoadEmptyAndMissing(t *testing.T) {
	t.Parallel()
	for _, text := range []string{"", "# only a comment\n", "advertise:\n"} {
		c, err := Load(writeFile(t, text))
		if err != nil {
			t.Fatalf("Load(%q) = %v", text, err)
		}
		if c != Default() {
			t.Fatalf("Load(%q) = %+v, want defaults", text, c)
		}
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.yaml")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Load(missing) = %v, want os.ErrNotExist", err)
	}
}

func TestApplyEnvReportsEveryBadValue(t *testing.T) {
	t.Parallel()
	c := Default()
	err := c.ApplyEnv(envMap(map[string]string{
		"DISGW_IDLE_TIMEOUT":       "x",
		"DISGW_DEFAULT_PARTITIONS": "y",
	}))
	if err == nil {
		t.Fatal("want an error")
	}
	for _, w := range []string{"DISGW_IDLE_TIMEOUT", "DISGW_DEFAULT_PARTITIONS"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not name %s", err, w)
		}
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		change func(*Config)
		wants  []string // one substring per expected problem; none = valid
	}{
		{"defaults", func(*Config) {}, nil},
		{"listen any port", func(c *Config) { c.Listen = "0.0.0.0:0" }, nil},
		{"listen empty host", func(c *Config) { c.Listen = ":9092" }, nil},
		{"advertise hostname", func(c *Config) { c.Advertise = "kafka.example:19092" }, nil},
		{"unlimited retention", func(c *Config) { c.DefaultRetention = -1 }, nil},
		{"retention check disabled", func(c *Config) { c.RetentionCheckInterval = -1 }, nil},
		{"request limits at the ceiling", func(c *Config) { c.MaxRequestTopics, c.MaxRequestPartitions = 1<<18, 1<<18 }, nil},
		{"request limits", func(c *Config) {
			c.MaxRequestTopics, c.MaxRequestPartitions, c.MaxRequestGroups = 0, 1<<18+1, -1
			c.AutoCreateTopicsPerRequest, c.AutoCreateTopicsPerSecond = 0, 0
		}, []string{"max_request_topics:", "max_request_partitions:", "max_request_groups:", "auto_create_topics_per_request:", "auto_create_topics_per_second:"}},
		{"listen without port", func(c *Config) { c.Listen = "127.0.0.1" }, []string{"listen:"}},
		{"listen bad port", func(c *Config) { c.Listen = "127.0.0.1:99999" }, []string{"listen:"}},
		{"advertise unspecified v4", func(c *Config) { c.Advertise = "0.0.0.0:9092" }, []string{"advertise:"}},
		{"advertise unspecified v6", func(c *Config) { c.Advertise = "[::]:9092" }, []string{"advertise:"}},
		{"advertise port 0", func(c *Config) { c.Advertise = "host:0" }, []string{"advertise:"}},
		{"advertise no host", func(c *Config) { c.Advertise = ":9092" }, []string{"advertise:"}},
		{"zero retention is the backend's", func(c *Config) { c.DefaultRetention = 0 }, nil},
		{"cluster on the embedded store", func(c *Config) { c.Cluster = true }, []string{"cluster: needs backend dis"}},
		{"cluster on dis", func(c *Config) {
			c.Backend, c.DISEndpoint, c.DISProjectID, c.DISToken, c.Cluster, c.NodeID = "dis", "https://dis.example", "p", "tok", true, 1023
		}, nil},
		{"node id out of range", func(c *Config) { c.NodeID = 1024 }, []string{"node_id:"}},
		{"dis endpoint without a host", func(c *Config) {
			c.Backend, c.DISEndpoint, c.DISProjectID, c.DISToken = "dis", "http://", "p", "tok"
		}, []string{"dis_endpoint:"}},
		{"dis endpoint without a scheme", func(c *Config) {
			c.Backend, c.DISEndpoint, c.DISProjectID, c.DISToken = "dis", "dis.example:443", "p", "tok"
		}, []string{"dis_endpoint:"}},
		{"unlimited retention on DIS", func(c *Config) {
			c.Backend, c.DISEndpoint, c.DISProjectID, c.DISToken, c.DefaultRetention = "dis", "https://dis.example", "p", "tok", -1
		}, []string{"default_retention:"}},
		{"dis with AK/SK", func(c *Config) {
			c.Backend, c.DISEndpoint, c.DISProjectID, c.DISAK, c.DISSK = "dis", "https://dis.example", "p", "ak", "sk"
		}, nil},
		{"dis with a token", func(c *Config) {
			c.Backend, c.DISEndpoint, c.DISProjectID, c.DISToken = "dis", "https://dis.example", "p", "tok"
		}, nil},
		{"dis with a credentials file", func(c *Config) {
			c.Backend, c.DISEndpoint, c.DISCredentialsFile = "dis", "https://dis.example", "/creds" // may give the project id
		}, nil},
		{"dis with AK/SK over a credentials file", func(c *Config) {
			c.Backend, c.DISEndpoint, c.DISAK, c.DISSK, c.DISCredentialsFile = "dis", "https://dis.example", "ak", "sk", "/creds"
		}, []string{"dis_project_id:"}}, // the file is not read
		{"dis without settings", func(c *Config) { c.Backend = "dis" }, []string{"dis_endpoint:", "dis_project_id:", "dis_ak:"}},
		{"dis AK without SK", func(c *Config) {
			c.Backend, c.DISEndpoint, c.DISProjectID, c.DISAK = "dis", "https://dis.example", "p", "ak"
		}, []string{"dis_ak:"}},
		{"record format", func(c *Config) { c.DISRecordFormat = "json" }, []string{"dis_record_format:"}},
		{"accumulator", func(c *Config) {
			c.DISLinger, c.DISBatchBytes, c.DISBatchCount, c.DISBufferBytes = -time.Millisecond, 6<<20, 0, -1
		}, []string{"dis_linger:", "dis_batch_bytes:", "dis_batch_count:", "dis_buffer_bytes:"}},
		{"zero retention check", func(c *Config) { c.RetentionCheckInterval = 0 }, []string{"retention_check_interval:"}},
		{"dis max.message.bytes and metadata refresh", func(c *Config) {
			c.Backend, c.DISEndpoint, c.DISProjectID, c.DISToken = "dis", "https://dis.example", "p", "tok"
			c.MaxMessageBytes, c.DISMetadataRefresh = DISMaxMessageBytes+1, 99*time.Millisecond
		}, []string{"max_message_bytes:", "dis_metadata_refresh:"}},
		{"dis max.message.bytes at the limit", func(c *Config) {
			c.Backend, c.DISEndpoint, c.DISProjectID, c.DISToken = "dis", "https://dis.example", "p", "tok"
			c.MaxMessageBytes = DISMaxMessageBytes
		}, nil},
		{"every problem at once", func(c *Config) {
			c.Listen = "nope"
			c.Advertise = "0.0.0.0:0"
			c.Data = ""
			c.Backend = "kafka"
			c.LogLevel = "verbose"
			c.MaxFrameBytes = 0
			c.IdleTimeout = -time.Second
			c.DefaultPartitions = 0
			c.MaxMessageBytes = -1
			c.ShutdownGrace = 0
		}, []string{"listen:", "advertise:", "data:", "backend:", "log_level:", "max_frame_bytes:",
			"idle_timeout:", "default_partitions:", "max_message_bytes:", "shutdown_grace:"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := Default()
			tc.change(&c)
			err := c.Validate()
			if len(tc.wants) == 0 {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Validate() = nil, want errors")
			}
			lines := strings.Split(err.Error(), "\n")
			if len(lines) != len(tc.wants) {
				t.Errorf("got %d problems, want %d:\n%v", len(lines), len(tc.wants), err)
			}
			for _, w := range tc.wants {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

// configs/dis.yaml loads and is valid once credentials are given.
func TestDISExample(t *testing.T) {
	t.Parallel()
	c, err := Load("dis.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.ApplyEnv(func(k string) string {
		return map[string]string{"DISGW_DIS_AK": "ak", "DISGW_DIS_SK": "sk"}[k]
	}); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil || c.Backend != BackendDIS || c.RetentionDefault() != 24*time.Hour {
		t.Fatalf("dis.yaml: %+v, %v", c, err)
	}

	// Or with a credentials file instead.
	c, err = Load("dis.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.ApplyEnv(func(k string) string {
		return map[string]string{"DISGW_DIS_CREDENTIALS_FILE": "/etc/disgw/credentials"}[k]
	}); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil || c.DISCredentialsFile != "/etc/disgw/credentials" {
		t.Fatalf("dis.yaml with DISGW_DIS_CREDENTIALS_FILE: %+v, %v", c, err)
	}
}
