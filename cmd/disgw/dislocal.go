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
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/disgw/disgw/configs"
	"github.com/disgw/disgw/disbackend/dislocal"
	"github.com/disgw/disgw/disbackend/localstore"
)

// dislocalCmd is `disgw dislocal`: the DIS REST API v2 emulator over an
// embedded store, for running and testing DIS applications offline.
func dislocalCmd(args []string, getenv func(string) string, stderr io.Writer) int {
	fs := flag.NewFlagSet("disgw dislocal", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: disgw dislocal [flags]\n\n%s\nFlags:\n", dislocalSecretsHelp)
		fs.PrintDefaults()
	}
	listen := fs.String("listen", "127.0.0.1:20004", "TCP address to bind, `HOST:PORT` (plain HTTP)")
	data := fs.String("data", "./dislocal-data", "`directory` of the store and dislocal's state (created 0700, files 0600)")
	ak := fs.String("ak", "", "require AK/SK signatures (SDK-HMAC-SHA256) with this access key (or env DISGW_DISLOCAL_AK); the secret key is in env DISGW_DISLOCAL_SK")
	credsFile := fs.String("credentials-file", "", "take the AK/SK (and project_id) from this Huawei Cloud SDK credentials `file` ([basic] ak, sk, project_id; or env DISGW_DISLOCAL_CREDENTIALS_FILE); not read when --ak is given")
	project := fs.String("project-id", "", "accept only this project id in paths; empty accepts any (or the credentials file's project_id)")
	flow := fs.Bool("flow-control", false, "apply DIS's per-partition rate limits (DIS.4303)")
	retentionUnit := fs.Duration("retention-unit", time.Hour, "length of one data_duration hour (e.g. 1m for tests)")
	noScalingLimits := fs.Bool("no-scaling-limits", false, "lift DIS's limits on UpdatePartitionCount (one success an hour)")
	latency := fs.Duration("fault-latency", 0, "add this latency to every DIS operation")
	jitter := fs.Duration("fault-jitter", 0, "add a uniformly random further latency in [0, this) to every DIS operation")
	errorRate := fs.Float64("fault-error-rate", 0, "answer this fraction (0-1) of requests with 500 DIS.5000")
	dropRate := fs.Float64("fault-drop-rate", 0, "close the connection of this fraction (0-1) of requests, before serving them")
	lostRate := fs.Float64("fault-lost-rate", 0, "serve this fraction (0-1) of requests, then close the connection without the answer")
	groupSession := fs.Duration("group-session-timeout", dislocal.DefaultGroupSessionTimeout, "drop a consumer-group member (DIS Kafka Adapter subscribe()) after this long without a heartbeat")
	groupSyncDelay := fs.Duration("group-sync-delay", 0, "a consumer-group rebalance's join window, answered as syncDelayedTimeMs; 0 means the members' rebalanceTimeoutMs, or 20s")
	var deny denyFlag
	fs.Var(&deny, "deny", "refuse requests signed with `AK` on streams whose name starts with PREFIX with 403 DIS.4116, as DIS's IAM does (AK:PREFIX; repeatable)")
	callLog := fs.Int("call-log", 0, "keep the last `N` PutRecords (access key, stream, records' data) in memory, served at GET /dislocal/calls")
	readyFile := fs.String("ready-file", "", "once listening, write the bound HOST:PORT to this `file` (mode 0600); removed at exit")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	if err := refusedSecretFlag(args); err != nil {
		fmt.Fprintf(stderr, "disgw dislocal: %v\n", err)
		return exitUsage
	}
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
	if *ak == "" {
		*ak = getenv("DISGW_DISLOCAL_AK")
	}
	if *credsFile == "" {
		*credsFile = getenv("DISGW_DISLOCAL_CREDENTIALS_FILE")
	}
	sk := getenv("DISGW_DISLOCAL_SK")
	token := getenv("DISGW_DISLOCAL_TOKEN")
	var errs []error
	keys, keysErr := parseDislocalKeys(getenv("DISGW_DISLOCAL_KEYS"))
	if keysErr != nil {
		errs = append(errs, keysErr)
	}
	if *callLog < 0 {
		errs = append(errs, errors.New("--call-log must be >= 0"))
	}
	switch {
	case *ak != "" && sk == "":
		errs = append(errs, errors.New("--ak needs the secret key in env DISGW_DISLOCAL_SK (or give both in --credentials-file, without --ak)"))
	case *ak == "" && sk != "":
		errs = append(errs, errors.New("env DISGW_DISLOCAL_SK needs --ak (or env DISGW_DISLOCAL_AK)"))
	}
	if *retentionUnit <= 0 {
		errs = append(errs, errors.New("--retention-unit must be > 0"))
	}
	if *groupSession <= 0 {
		errs = append(errs, errors.New("--group-session-timeout must be > 0"))
	}
	if *groupSyncDelay < 0 {
		errs = append(errs, errors.New("--group-sync-delay must be >= 0"))
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
	var credsWarning, credsFrom string
	switch {
	case *ak != "":
		credsFrom = "DISGW_DISLOCAL_SK"
	case *credsFile != "":
		cr, err := configs.ReadCredentialsFile(*credsFile, "--credentials-file")
		if err != nil {
			fmt.Fprintf(stderr, "disgw dislocal: %v\n", err)
			return exitError
		}
		*ak, sk, credsWarning, credsFrom = cr.AK, cr.SK, cr.Warning, *credsFile
		if *project == "" {
			*project = cr.ProjectID
		}
	}
	log, err := newLogger(*logLevel, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "disgw dislocal: %v\n", err)
		return exitUsage
	}
	defer log.Sync() //nolint:errcheck // nothing to do if stderr cannot sync
	if credsWarning != "" {
		log.Warn(credsWarning)
	}
	if *ak != "" && *credsFile != "" && credsFrom != *credsFile {
		log.Info("credentials file not read: --ak (DISGW_DISLOCAL_AK) and DISGW_DISLOCAL_SK take precedence", zap.String("file", *credsFile))
	}

	opts := dislocal.Options{
		ProjectID: *project, AK: *ak, SK: sk, Token: token, Keys: keys, Deny: deny.m, CallLog: *callLog,
		FlowControl: *flow, RetentionUnit: *retentionUnit, NoScalingLimits: *noScalingLimits,
		GroupSessionTimeout: *groupSession, GroupSyncDelay: *groupSyncDelay,
		Faults: dislocal.Faults{Latency: *latency, Jitter: *jitter, ErrorRate: *errorRate, DropRate: *dropRate, LostRate: *lostRate},
		Logger: log,
	}
	if err := runDislocal(*listen, *data, *readyFile, credsFrom, opts, log); err != nil {
		log.Error("failed", zap.Error(err))
		return exitError
	}
	return exitOK
}

// dislocalSecretsHelp is the part of `disgw dislocal -h` on secrets.
const dislocalSecretsHelp = `Secrets are never flags (a flag's value shows in ps and /proc/PID/cmdline):
  DISGW_DISLOCAL_SK                the secret key of --ak (DISGW_DISLOCAL_AK)
  DISGW_DISLOCAL_TOKEN             accept this X-Auth-Token
  DISGW_DISLOCAL_KEYS              further key pairs to accept, AK:SK,AK:SK,...
  --credentials-file FILE          or DISGW_DISLOCAL_CREDENTIALS_FILE: the AK/SK
                                   in the Huawei Cloud SDK's INI format
Without an AK/SK or a token, every request is served unauthenticated.
`

// parseDislocalKeys reads DISGW_DISLOCAL_KEYS, "AK:SK,AK:SK,...". Errors
// name the position of a bad item, never its secret.
func parseDislocalKeys(v string) (map[string]string, error) {
	if strings.TrimSpace(v) == "" {
		return nil, nil
	}
	keys := map[string]string{}
	for i, item := range strings.Split(v, ",") {
		ak, sk, ok := strings.Cut(strings.TrimSpace(item), ":")
		if !ok || ak == "" || sk == "" {
			return nil, fmt.Errorf("env DISGW_DISLOCAL_KEYS: item %d is not AK:SK", i+1)
		}
		if _, dup := keys[ak]; dup {
			return nil, fmt.Errorf("env DISGW_DISLOCAL_KEYS: access key %s given twice", ak)
		}
		keys[ak] = sk
	}
	return keys, nil
}

// denyFlag is --deny AK:PREFIX, repeatable.
type denyFlag struct{ m map[string][]string }

func (d *denyFlag) String() string { return "" }

func (d *denyFlag) Set(v string) error {
	ak, prefix, ok := strings.Cut(v, ":")
	if !ok || ak == "" {
		return errors.New("want AK:PREFIX")
	}
	if d.m == nil {
		d.m = map[string][]string{}
	}
	d.m[ak] = append(d.m[ak], prefix)
	return nil
}

// removedSecretFlags are the flags that used to take a secret; they are
// refused, naming where the secret goes now.
var removedSecretFlags = map[string]string{
	"sk":    "the secret key goes in env DISGW_DISLOCAL_SK or in --credentials-file",
	"token": "the token goes in env DISGW_DISLOCAL_TOKEN",
}

// refusedSecretFlag returns a usage error when args give --sk or --token
// (-sk, --sk=V, ...) before a "--": their values would show in ps. The error
// never quotes the value.
func refusedSecretFlag(args []string) error {
	for _, a := range args {
		if a == "--" {
			return nil
		}
		if !strings.HasPrefix(a, "-") {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-"), "=")
		if where, ok := removedSecretFlags[name]; ok {
			return fmt.Errorf("flag --%s is no longer accepted, as its value would show in ps and /proc/PID/cmdline: %s", name, where)
		}
	}
	return nil
}

// runDislocal serves until SIGTERM or SIGINT, then shuts down (in-flight
// requests finish) and closes the store.
func runDislocal(listen, data, readyFile, credsFrom string, opts dislocal.Options, log *zap.Logger) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	storeDir := filepath.Join(data, "store")
	if err := os.MkdirAll(storeDir, 0o700); err != nil {
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
		zap.String("data", data), zap.Bool("signatures", opts.AK != "" || len(opts.Keys) > 0), zap.Int("further_keys", len(opts.Keys)), zap.String("credentials", credsFrom),
		zap.Bool("token", opts.Token != ""), zap.Bool("flow_control", opts.FlowControl), zap.Duration("retention_unit", opts.RetentionUnit))
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
