// Package disproto holds the Go types of the DIS SDKs' protobuf bodies for
// PutRecords (PutRecordsRequest, PutRecordsResult) and GetRecords
// (GetRecordsResult), generated from message.proto, a copy of the Java
// DIS SDK's schema (proto2). It owns the schema and the generated code
// only; dislocal decodes and encodes with it.
//
// message.pb.go is committed (CI has no protoc). To regenerate, put protoc
// (Maven Central: com.google.protobuf:protoc:4.33.5:exe:linux-x86_64) and
// protoc-gen-go (go install
// google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12, the version of
// google.golang.org/protobuf in go.mod) on PATH and run
//
//	go generate ./disbackend/dislocal/disproto
package disproto

//go:generate protoc --proto_path=../../.. --go_out=../../.. --go_opt=module=github.com/disgw/disgw disbackend/dislocal/disproto/message.proto
