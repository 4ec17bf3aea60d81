package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/disgw/disgw/disbackend/dislocal"
	"github.com/disgw/disgw/disbackend/localstore"
)

// dislocalCmd is `disgw dislocal`: the DIS REST API v2 emulator over an
// embedded store, for running and testing DIS applications offline.
func dislocalCmd(args []string, getenv func(string) string, stderr io.Writer) int {
	fs := flag.NewFlagSet("disgw dislocal", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:20004", "TCP address to bind, `HOST:PORT` (plain HTTP)")
	data := fs.String("data", "./dislocal-data", "`directory` of the store and dislocal's state")
	ak := fs.String("ak", "", "require AK/SK signatures (SDK-HMAC-SHA256) with this access key")
	sk := fs.String("sk", "", "the secret key for --ak (or env DISGW_DISLOCAL_SK, which keeps it out of ps)")
	token := fs.String("token", "", "accept this X-Auth-Token (or env DISGW_DISLOCAL_TOKEN)")
	project := fs.String("project-id", "", "accept only this project id in paths; empty accepts any")
	flow := fs.Bool("flow-control", false, "apply DIS's per-partition rate limits (DIS.4303)")
	retentionUnit := fs.Duration("retention-unit", time.Hour, "length of one data_duration hour (e.g. 1m for tests)")
	noScalingLimits := fs.Bool("no-scaling-limits", false, "lift DIS's limits on UpdatePartitionCount (one success an hour)")
	latency := fs.Duration("fault-latency", 0, "add this latency to every DIS operation")
	jitter := fs.Duration("fault-jitter", 0, "add a uniformly random further latency in [0, this) to every DIS operation")
	errorRate := fs.Float64("fault-error-rate", 0, "answer this fraction (0-1) of requests with 500 DIS.5000")
	dropRate := fs.Float64("fault-drop-rate", 0, "close the connection of this fraction (0-1) of requests, before serving them")
	lostRate := fs.Float64("fault-lost-rate", 0, "serve this fraction (0-1) of requests, then close the connection without the answer")
	readyFile := fs.String("ready-file", "", "once listening, write the bound HOST:PORT to this `file`; removed at exit")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "disgw dislocal: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	if *sk == "" {
		*sk = getenv("DISGW_DISLOCAL_SK")
	}
	if *token == "" {
		*token = getenv("DISGW_DISLOCAL_TOKEN")
	}
	var errs []error
	if (*ak == "") != (*sk == "") {
		errs = append(errs, errors.New("--ak and --sk go together"))
	}
	if *retentionUnit <= 0 {
		errs = append(errs, errors.New("--retention-unit must be > 0"))
	}
	for name, v := range map[string]float64{"--fault-error-rate": *errorRate, "--fault-drop-rate": *dropRate, "--fault-lost-rate": *lostRate} {
		if v < 0 || v > 1 {
			errs = append(errs, fmt.Errorf("%s %v must be 0-1", name, v))
		}
	}
	if err := errors.Join(errs...); err != nil {
		fmt.Fprintf(stderr, "disgw dislocal: %v\n", err)
		return exitUsage
	}
	log, err := newLogger(*logLevel, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "disgw dislocal: %v\n", err)
		return exitUsage
	}
	defer log.Sync() //nolint:errcheck // nothing to do if stderr cannot sync

	opts := dislocal.Options{
		ProjectID: *project, AK: *ak, SK: *sk, Token: *token,
		FlowControl: *flow, RetentionUnit: *retentionUnit, NoScalingLimits: *noScalingLimits,
		Faults: dislocal.Faults{Latency: *latency, Jitter: *jitter, ErrorRate: *errorRate, DropRate: *dropRate, LostRate: *lostRate},
		Logger: log,
	}
	if err := runDislocal(*listen, *data, *readyFile, opts, log); err != nil {
		log.Error("failed", zap.Error(err))
		return exitError
	}
	return exitOK
}

// runDislocal serves until SIGTERM or SIGINT, then shuts down (in-flight
// requests finish) and closes the store.
func runDislocal(listen, data, readyFile string, opts dislocal.Options, log *zap.Logger) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	storeDir := filepath.Join(data, "store")
	if err := os.MkdirAll(storeDir, 0o755); err != nil {
		return fmt.Errorf("data directory: %w", err)
	}
	// Retention passes run at a tenth of the retention unit, at most once a minute.
	store, err := localstore.Open(storeDir, localstore.Options{
		Logger:                 log,
		RetentionCheckInterval: min(opts.RetentionUnit/10, time.Minute),
	})
	if err != nil {
		return err
	}
	defer store.Close()
	opts.StateFile = filepath.Join(data, "dislocal.json")
	srv, err := dislocal.New(store, opts)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 30 * time.Second, ErrorLog: zap.NewStdLog(log.Named("http"))}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	log.Info("dislocal started", zap.String("version", version), zap.String("listen", ln.Addr().String()),
		zap.String("data", data), zap.Bool("signatures", opts.AK != ""), zap.Bool("flow_control", opts.FlowControl))
	if readyFile != "" {
		if err := writeFileAtomic(readyFile, ln.Addr().String()+"\n"); err != nil {
			_ = hs.Close()
			<-served
			return fmt.Errorf("ready file: %w", err)
		}
		defer os.Remove(readyFile)
	}
	var serveErr error
	select {
	case <-ctx.Done():
		stop()
		log.Info("shutting down")
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		serveErr = hs.Shutdown(sctx)
		<-served
	case serveErr = <-served:
	}
	if errors.Is(serveErr, http.ErrServerClosed) {
		serveErr = nil
	}
	if serveErr == nil {
		log.Info("stopped")
	}
	return serveErr
}
