package main

import (
	"fmt"
	"runtime/debug"

	"github.com/IBM/sarama"
	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/disgw/disgw/compat/internal/scen"
)

// scenInfoModule reports the version of a Go module built into this binary.
func scenInfoModule(path string) {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return
	}
	for _, d := range bi.Deps {
		if d.Path == path {
			scen.Info("version", d.Path+" "+d.Version)
			return
		}
	}
}

func confluentInfo() {
	_, v := kafka.LibraryVersion()
	scen.Info("librdkafka", v)
}

func newSarama(name, broker string) saramaClient {
	c := saramaClient{broker: broker, name: name}
	var v sarama.KafkaVersion
	switch name {
	case "sarama-v0.11":
		v = sarama.V0_11_0_0
	case "sarama-v2.1":
		v = sarama.V2_1_0_0
	default:
		scen.Info("Config.Version", fmt.Sprintf("default (%s)", sarama.NewConfig().Version))
		return c
	}
	scen.Info("Config.Version", v.String())
	c.version = &v
	return c
}
