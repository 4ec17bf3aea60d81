// Package layers holds no code: its test checks that the packages of disgw
// import only what docs/architecture.md §2 lets them (imports point down:
// cmd → configs, cmd → gateway → {groupcoord, kafkawire, disbackend};
// the backends import disbackend and the leaf batch codec, never kmsg;
// internal/metrics and internal/bytebudget are leaves every layer may
// import; internal/errmap, the Kafka error table, sits under gateway and
// groupcoord; cmd → admin → gateway).
package layers
