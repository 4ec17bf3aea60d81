package main

import (
	"reflect"
	"testing"
	"time"

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
