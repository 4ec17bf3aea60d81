package main

import (
	"errors"
	"os"
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
	opts := disLocalOpts{account: disAccount{"access-key", "secret-key", "pid"}}

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

	p := startDISLocal(t, opts)
	c := client(p.addr)
	advanced := model.GetCreateStreamReqStreamTypeEnum().ADVANCED
	if _, err := c.CreateStream(&model.CreateStreamRequest{Body: &model.CreateStreamReq{StreamName: "cmd", PartitionCount: 2, StreamType: &advanced}}); err != nil {
		t.Fatal(err)
	}
	if code := p.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("exit code after SIGTERM = %d, want 0", code)
	}
	p.logLine(t, "stopped")
	if _, err := os.Stat(p.ready); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("ready file left after exit: %v", err)
	}

	opts.data = p.opts.data // the same data directory, on a port of its own again
	p = startDISLocal(t, opts)
	c = client(p.addr)
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
