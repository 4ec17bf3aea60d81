package main

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/huaweicloud/huaweicloud-sdk-go-v3/core/auth/basic"
	"github.com/huaweicloud/huaweicloud-sdk-go-v3/core/config"
	dis "github.com/huaweicloud/huaweicloud-sdk-go-v3/services/dis/v2"
	"github.com/huaweicloud/huaweicloud-sdk-go-v3/services/dis/v2/model"
)

// TestDislocalCommand starts `disgw dislocal` with signatures on (the SK
// from the environment), creates a stream with the official SDK, restarts
// it on the same data directory and finds the stream with its stream type.
func TestDislocalCommand(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ready := filepath.Join(dir, "ready")
	env := environ("DISGW_DISLOCAL_SK=secret-key")
	args := []string{"dislocal", "--listen", "127.0.0.1:0", "--data", filepath.Join(dir, "data"),
		"--ak", "access-key", "--project-id", "pid", "--ready-file", ready}

	client := func(addr string) *dis.DisClient {
		cred, err := basic.NewCredentialsBuilder().WithAk("access-key").WithSk("secret-key").WithProjectId("pid").SafeBuild()
		if err != nil {
			t.Fatal(err)
		}
		hc, err := dis.DisClientBuilder().WithEndpoints([]string{"http://" + addr}).WithCredential(cred).
			WithHttpConfig(config.DefaultHttpConfig().WithTimeout(10 * time.Second)).SafeBuild()
		if err != nil {
			t.Fatal(err)
		}
		return dis.NewDisClient(hc)
	}

	p := start(t, env, args...)
	c := client(p.waitReady(t, ready))
	advanced := model.GetCreateStreamReqStreamTypeEnum().ADVANCED
	if _, err := c.CreateStream(&model.CreateStreamRequest{Body: &model.CreateStreamReq{StreamName: "cmd", PartitionCount: 2, StreamType: &advanced}}); err != nil {
		t.Fatal(err)
	}
	if code := p.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("exit code after SIGTERM = %d, want 0", code)
	}
	p.logLine(t, "stopped")
	if _, err := os.Stat(ready); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("ready file left after exit: %v", err)
	}

	p = start(t, env, args...)
	c = client(p.waitReady(t, ready))
	desc, err := c.ShowStream(&model.ShowStreamRequest{StreamName: "cmd"})
	if err != nil {
		t.Fatal(err)
	}
	if desc.StreamType.Value() != "ADVANCED" || len(*desc.Partitions) != 2 {
		t.Fatalf("after restart: %+v", desc)
	}
	if code := p.stop(t, syscall.SIGINT); code != 0 {
		t.Fatalf("exit code after SIGINT = %d, want 0", code)
	}
}
