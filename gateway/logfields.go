package gateway

import "go.uber.org/zap"

// Log field helpers: each key is spelled once, here.
func zapTopic(t string) zap.Field    { return zap.String("topic", t) }
func zapGroup(g string) zap.Field    { return zap.String("group", g) }
func zapPartition(p int32) zap.Field { return zap.Int32("partition", p) }
func zapErr(err error) zap.Field     { return zap.Error(err) }

func zapInt32(k string, v int32) zap.Field { return zap.Int32(k, v) }

func zapPrincipal(p string) zap.Field { return zap.String("principal", p) }
func zapCount(n int) zap.Field        { return zap.Int("count", n) }
