package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"reflect"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/disgw/disgw/configs"
	"github.com/disgw/disgw/gateway"
	"github.com/disgw/disgw/kafkawire"
)

func TestGatewayConfig(t *testing.T) {
	t.Parallel()
	c := configs.Default()
	c.Listen = "127.0.0.1:0"
	c.Advertise = "h:1"
	c.MaxFrameBytes = 1000
	c.IdleTimeout = time.Second
	c.AutoCreateTopics = false
	c.DefaultPartitions = 3
	c.DefaultRetention = -1
	c.MaxMessageBytes = 500
	c.ShutdownGrace = 2 * time.Second
	c.MaxDecompressedMessageBytes = 3 << 20
	c.DecompressionBudgetBytes = 5 << 20
	g := gatewayConfig(c)
	if g.MaxDecompressedMessageBytes != 3<<20 || g.DecompressionBudgetBytes != 5<<20 {
		t.Fatalf("gatewayConfig() = %+v does not mirror the decompression limits of %+v", g, c)
	}
	if g.Listen != c.Listen || g.Advertise != c.Advertise || g.MaxFrameBytes != 1000 ||
		g.IdleTimeout != time.Second || g.AutoCreateTopics || g.DefaultPartitions != 3 ||
		g.DefaultRetention != -1 || g.MaxMessageBytes != 500 || g.ShutdownGrace != 2*time.Second {
		t.Fatalf("gatewayConfig() = %+v does not mirror %+v", g, c)
	}
	c.MaxRequestTopics, c.MaxRequestPartitions, c.MaxRequestGroups = 7, 8, 9
	c.AutoCreateTopicsPerRequest, c.AutoCreateTopicsPerSecond, c.PartitionMutationsPerSecond = 10, 0.5, 3
	g = gatewayConfig(c)
	if want := (gateway.RequestLimits{MaxTopics: 7, MaxPartitions: 8, MaxGroups: 9, AutoCreatePerRequest: 10, AutoCreatePerSecond: 0.5,
		PartitionMutationsPerSecond: 3}); g.Limits != want {
		t.Fatalf("gatewayConfig().Limits = %+v, want %+v", g.Limits, want)
	}
	if g.WriteTimeout == 0 || g.MaxInFlight == 0 || g.RequestOverhead == 0 {
		t.Fatalf("gatewayConfig() = %+v lost gateway defaults of keys not configured here", g)
	}
}

// configs states its own defaults (it does not import gateway); mapped onto
// the gateway they must be exactly gateway.DefaultConfig, field by field, so
// the two cannot drift apart.
func TestGatewayConfigDefaults(t *testing.T) {
	t.Parallel()
	got, want := reflect.ValueOf(gatewayConfig(configs.Default())), reflect.ValueOf(gateway.DefaultConfig())
	for i := range got.NumField() {
		name := got.Type().Field(i).Name
		if g, w := got.Field(i).Interface(), want.Field(i).Interface(); !reflect.DeepEqual(g, w) {
			t.Errorf("gateway.Config.%s from configs.Default() = %v, gateway.DefaultConfig() has %v", name, g, w)
		}
	}
}

func TestMaxRequestEntriesAgree(t *testing.T) {
	if configs.MaxRequestEntries != kafkawire.MaxRequestEntries {
		t.Fatalf("configs.MaxRequestEntries %d, kafkawire.MaxRequestEntries %d", configs.MaxRequestEntries, kafkawire.MaxRequestEntries)
	}
}

// Every setting's gateway tag names a gateway.Config field, and every
// setting that fills one (by its tag or by its field's name) has a value
// gatewayConfig can copy onto it.
func TestGatewayConfigMapsEverySetting(t *testing.T) {
	t.Parallel()
	var g gateway.Config
	gv := reflect.ValueOf(&g).Elem()
	c := configs.Default()
	filled := map[string]string{}
	for _, s := range configs.Settings() {
		path, ok, err := s.GatewayField(func(path string) bool { return gatewayField(gv, path).IsValid() })
		if err != nil {
			t.Error(err)
			continue
		}
		if !ok {
			continue
		}
		if other, dup := filled[path]; dup {
			t.Errorf("settings %s and %s both fill gateway.Config.%s", other, s.Key, path)
		}
		filled[path] = s.Key
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("configs.Config.%s onto gateway.Config.%s: %v", s.Field, path, r)
				}
			}()
			copySetting(gatewayField(gv, path), c.Value(s), s.Key)
		}()
	}
}

// Each flag of serve that sets a key is named by that key's flag tag, with
// the key's default as its own; --config and --ready-file set no key.
func TestFlagsMatchSettings(t *testing.T) {
	t.Parallel()
	fs, _, _ := serveFlags(io.Discard)
	def := configs.Default()
	tagged := map[string]bool{}
	for _, s := range configs.Settings() {
		if s.Flag == "" {
			continue
		}
		tagged[s.Flag] = true
		f := fs.Lookup(s.Flag)
		if f == nil {
			t.Errorf("key %s has tag flag:%q, but serveFlags defines no --%s", s.Key, s.Flag, s.Flag)
			continue
		}
		if want := fmt.Sprint(def.Value(s).Interface()); f.DefValue != want {
			t.Errorf("--%s defaults to %q, key %s to %q", s.Flag, f.DefValue, s.Key, want)
		}
	}
	fs.VisitAll(func(f *flag.Flag) {
		if !tagged[f.Name] && f.Name != "config" && f.Name != "ready-file" {
			t.Errorf("--%s sets no key: give the key's configs.Config field the tag flag:%q", f.Name, f.Name)
		}
	})
}

// TestConfigEverySettingReachesAnOption: each setting, changed on its own,
// changes the options cmd/disgw builds (gatewayConfig, disrestOptions,
// localstoreOptions, metricsOptions, adminSettings) on one of several
// bases, or is one main reads itself. A new setting mapped nowhere fails
// here, by name.
func TestConfigEverySettingReachesAnOption(t *testing.T) {
	t.Parallel()
	readByMain := map[string]string{
		"log_level":                   "newLogger",
		"data":                        "openBackend: the embedded store's directory",
		"backend":                     "openBackend: which backend",
		"sasl_users_file":             "saslUsers reads it",
		"dis_credentials_file":        "disCredentials reads it (configs.Config.DISCredentials)",
		"cluster_secret":              "clusterForwarding derives gateway.Config.ClusterKey from it (TestClusterForwardingKey)",
		"cluster_controlled_shutdown": "runGateway resigns from the cluster before it stops (TestClusterRollingRestart)",
	}
	// Values a setting is changed to where appending to a string would
	// make it invalid (and so map to nothing).
	samples := map[string]string{
		"listeners":                      "PLAINTEXT://127.0.0.1:1,SSL://127.0.0.1:2",
		"advertised_listeners":           "PLAINTEXT://h:1",
		"listener_security_protocol_map": "PLAINTEXT:SSL",
		"sasl_enabled_mechanisms":        "PLAIN",
		"super_users":                    "User:x",
	}
	dis := func(mod func(*configs.Config)) configs.Config {
		c := configs.Default()
		c.Backend, c.DISEndpoint, c.DISProjectID = configs.BackendDIS, "https://dis.example", "p"
		mod(&c)
		return c
	}
	bases := []configs.Config{
		configs.Default(),
		dis(func(c *configs.Config) { c.DISAK, c.DISSK = "ak", "sk" }),
		dis(func(c *configs.Config) { c.DISToken = "token" }),
		func() configs.Config { c := configs.Default(); c.ListenersList = "PLAINTEXT://127.0.0.1:1"; return c }(),
	}
	options := func(c configs.Config) string {
		creds, _ := c.DISCredentials()
		return fmt.Sprintf("%+v\n%+v\n%+v\n%+v\n%+v", gatewayConfig(c), disrestOptions(c, creds, nil, nil),
			localstoreOptions(c, nil, nil), metricsOptions(c), adminSettings(c))
	}
	for _, s := range configs.Settings() {
		if readByMain[s.Key] != "" {
			continue
		}
		reached := false
		for _, base := range bases {
			changed := base
			v := changed.Value(s)
			switch {
			case samples[s.Key] != "":
				v.SetString(samples[s.Key])
			case len(s.Values) > 0:
				for _, a := range s.Values {
					if a != v.String() {
						v.SetString(a)
						break
					}
				}
			case v.Kind() == reflect.String:
				v.SetString(v.String() + "x")
			case v.Kind() == reflect.Bool:
				v.SetBool(!v.Bool())
			case v.Kind() == reflect.Float64:
				v.SetFloat(v.Float()*2 + 1)
			case v.Type() == reflect.TypeFor[time.Duration]():
				v.SetInt(v.Int()*2 + int64(time.Second))
			default:
				v.SetInt(v.Int()*2 + 1)
			}
			if options(changed) != options(base) {
				reached = true
				break
			}
		}
		if !reached {
			t.Errorf("key %s (configs.Config.%s) changes none of the options cmd/disgw builds: give gateway.Config a field %s "+
				"(or tag the key gateway:\"PATH\"), or map it onto its package's options in cmd/disgw", s.Key, s.Field, s.Field)
		}
	}
}

// TestProducerIDExpirationReachesBothBackends: producer_id_expiration is
// each backend's ProducerStateExpiry and the gateway's (DescribeConfigs)
// ProducerIDExpiration.
func TestProducerIDExpirationReachesBothBackends(t *testing.T) {
	t.Parallel()
	c := configs.Default()
	if c.ProducerIDExpiration != 24*time.Hour {
		t.Fatalf("default producer_id_expiration %v, want Kafka's 86400000 ms", c.ProducerIDExpiration)
	}
	c.ProducerIDExpiration = 90 * time.Minute
	creds, _ := c.DISCredentials()
	if l, d, g := localstoreOptions(c, nil, nil).ProducerStateExpiry, disrestOptions(c, creds, nil, nil).ProducerStateExpiry,
		gatewayConfig(c).ProducerIDExpiration; l != c.ProducerIDExpiration || d != c.ProducerIDExpiration || g != c.ProducerIDExpiration {
		t.Fatalf("localstore %v, disrest %v, gateway %v; want %v", l, d, g, c.ProducerIDExpiration)
	}
}

// TestClusterForwardingKey: in cluster mode the forwarding key is derived
// from cluster_secret, else from dis_sk, alike on every node; with neither,
// or on one node, there is none.
func TestClusterForwardingKey(t *testing.T) {
	key := func(cluster bool, secret, sk string) []byte {
		c := configs.Default()
		c.Cluster, c.ClusterSecret = cluster, secret
		var g gateway.Config
		if err := clusterForwarding(c, configs.DISCredentials{SK: sk}, &g, zap.NewNop()); err != nil {
			t.Fatal(err)
		}
		return g.ClusterKey
	}
	if k := key(false, "s", "sk"); k != nil {
		t.Fatalf("one node: key %x, want none", k)
	}
	if k := key(true, "", ""); k != nil {
		t.Fatalf("no secret, no dis_sk: key %x, want none", k)
	}
	a, b, c := key(true, "s", "sk"), key(true, "s", "other"), key(true, "", "sk")
	if len(a) != 32 || !bytes.Equal(a, b) || bytes.Equal(a, c) || len(c) != 32 {
		t.Fatalf("keys %x %x %x: want cluster_secret's alike whatever dis_sk, and dis_sk's another", a, b, c)
	}
}
