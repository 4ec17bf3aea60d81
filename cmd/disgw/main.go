// Command disgw serves the Kafka wire protocol in front of Huawei Cloud DIS,
// with an embedded store as the default backend.
//
//	disgw [serve] [flags]   start the gateway (the default command)
//	disgw dislocal [flags]  run the DIS REST API emulator
//	disgw version           print the version and build information
//	disgw help              print the commands and serve's flags
//
// main owns flag parsing, mapping the configuration onto each package's
// options (gatewayConfig, openBackend), logging set-up and signal handling
// only; the configuration rules live in package configs, the server in
// gateway and the backends under disbackend.
package main

import (
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"reflect"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/disgw/disgw/admin"
	"github.com/disgw/disgw/configs"
	"github.com/disgw/disgw/disbackend"
	"github.com/disgw/disgw/disbackend/disrest"
	"github.com/disgw/disgw/disbackend/localstore"
	"github.com/disgw/disgw/gateway"
	"github.com/disgw/disgw/internal/metrics"
)

// version is set at build time: go build -ldflags "-X main.version=v1.2.3"
// (the Makefile gives git describe). When it is not, init takes it from the
// build info (versionFromBuildInfo).
var version string

func init() {
	if version == "" {
		bi, _ := debug.ReadBuildInfo()
		version = versionFromBuildInfo(bi)
	}
}

// versionFromBuildInfo is the version of a binary built without
// -X main.version: the main module's version unless it is "(devel)" (go
// install module@v1.2.3, or the pseudo-version go build stamps from the VCS
// since Go 1.24), else the VCS revision's first 12 characters with "-dirty"
// when the work tree had changes, else "dev". bi may be nil.
func versionFromBuildInfo(bi *debug.BuildInfo) string {
	if bi == nil {
		return "dev"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev string
	modified := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if rev == "" {
		return "dev"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if modified {
		rev += "-dirty"
	}
	return rev
}

// Exit codes.
const (
	exitOK    = 0
	exitError = 1 // the gateway failed while starting, serving or stopping
	exitUsage = 2 // bad command, flag or configuration
)

func main() {
	os.Exit(run(os.Args[1:], os.LookupEnv, os.Stdout, os.Stderr))
}

// run runs the command of args; lookupEnv is os.LookupEnv, which tells an
// empty variable from an unset one (configs.Config.ApplyLookupEnv).
func run(args []string, lookupEnv func(string) (string, bool), stdout, stderr io.Writer) int {
	getenv := func(name string) string { v, _ := lookupEnv(name); return v }
	cmd := "serve"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, args = args[0], args[1:]
	} else if len(args) > 0 && (args[0] == "--version" || args[0] == "-version") {
		cmd, args = "version", args[1:]
	}
	switch cmd {
	case "serve":
		return serve(args, lookupEnv, stderr)
	case "dislocal":
		return dislocalCmd(args, getenv, stderr)
	case "version":
		printVersion(stdout)
		return exitOK
	case "help":
		if len(args) > 0 && args[0] == "dislocal" {
			return dislocalCmd([]string{"-h"}, getenv, stdout)
		}
		fs, _, _ := serveFlags(stdout)
		fs.Usage()
		return exitOK
	default:
		fmt.Fprintf(stderr, "disgw: unknown command %q\n\n", cmd)
		usage(stderr)
		return exitUsage
	}
}

// commands opens every usage message: one line per command.
const commands = `Usage:
  disgw [serve] [flags]   start the gateway (the default command)
  disgw dislocal [flags]  run the DIS REST API v2 emulator ("disgw dislocal -h" for its flags)
  disgw version           print the version and build information (also --version)
  disgw help [dislocal]   print this help, or dislocal's
`

// usage is the message of an unknown command: the commands alone.
func usage(w io.Writer) {
	fmt.Fprint(w, commands+`
Run "disgw -h" for the flags of serve.
`)
}

// serveUsage is the help of disgw -h, --help, help and serve -h: the
// commands, then serve's flags.
func serveUsage(fs *flag.FlagSet) {
	w := fs.Output()
	fmt.Fprint(w, commands+`
Flags of serve. Every setting can also come from a YAML file (--config) or a
DISGW_* environment variable; see configs/disgw.yaml.
`)
	fs.PrintDefaults()
}

func printVersion(w io.Writer) {
	fmt.Fprintf(w, "disgw %s\n", version)
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return
	}
	fmt.Fprintf(w, "go: %s\n", bi.GoVersion)
	if bi.Main.Version != "" {
		fmt.Fprintf(w, "module: %s %s\n", bi.Main.Path, bi.Main.Version)
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision", "vcs.time", "vcs.modified", "GOOS", "GOARCH", "-race":
			fmt.Fprintf(w, "%s: %s\n", s.Key, s.Value)
		}
	}
}

// flagKey returns the configuration key that flag name of serve sets: the
// key whose flag tag names it (TestFlagsMatchSettings checks that every
// such tag has its flag in serveFlags, and every flag but --config and
// --ready-file a tag).
func flagKey(name string) (string, bool) {
	for _, s := range configs.Settings() {
		if s.Flag == name {
			return s.Key, true
		}
	}
	return "", false
}

// serveFlags defines serve's flags on a new flag set writing to w; the
// flags that mirror a configuration key are read back by name (flagKey).
func serveFlags(w io.Writer) (fs *flag.FlagSet, configFile, readyFile *string) {
	def := configs.Default()
	fs = flag.NewFlagSet("disgw serve", flag.ContinueOnError)
	fs.SetOutput(w)
	fs.Usage = func() { serveUsage(fs) }
	configFile = fs.String("config", "", "YAML configuration `file` (see configs/disgw.yaml)")
	readyFile = fs.String("ready-file", "", "once listening, write the advertised HOST:PORT to this `file`; removed at exit")
	fs.String("listen", def.Listen, "TCP address to bind, `HOST:PORT` (env DISGW_LISTEN)")
	fs.String("advertise", def.Advertise, "`HOST:PORT` given to clients; empty = the bound address (env DISGW_ADVERTISE)")
	fs.String("data", def.Data, "`directory` of the embedded store (env DISGW_DATA)")
	fs.String("backend", def.Backend, "backend: local or dis (env DISGW_BACKEND)")
	fs.String("dis-endpoint", def.DISEndpoint, "DIS endpoint `URL`, backend dis (env DISGW_DIS_ENDPOINT)")
	fs.String("dis-project-id", def.DISProjectID, "DIS project `id`, backend dis (env DISGW_DIS_PROJECT_ID); "+
		"credentials from DISGW_DIS_AK and DISGW_DIS_SK, or DISGW_DIS_TOKEN, or --dis-credentials-file")
	fs.String("dis-credentials-file", def.DISCredentialsFile, "Huawei Cloud SDK credentials `file` (INI, [basic] ak, sk, "+
		"optional security_token and project_id), read when DISGW_DIS_AK and DISGW_DIS_TOKEN are unset (env DISGW_DIS_CREDENTIALS_FILE)")
	fs.String("dis-region", def.DISRegion, "DIS `region`, informational (env DISGW_DIS_REGION)")
	fs.String("log-level", def.LogLevel, "debug, info, warn or error (env DISGW_LOG_LEVEL)")
	fs.String("admin-listen", def.AdminListen, "`HOST:PORT` of the admin HTTP listener (/healthz, /readyz, /metrics, console at /); empty turns it off (env DISGW_ADMIN_LISTEN)")
	return fs, configFile, readyFile
}

func serve(args []string, lookupEnv func(string) (string, bool), stderr io.Writer) int {
	fs, configFile, readyFile := serveFlags(stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "disgw: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}

	// Defaults < YAML file < environment < flags set on the command line.
	cfg := configs.Default()
	if *configFile != "" {
		var err error
		if cfg, err = configs.Load(*configFile); err != nil {
			fmt.Fprintf(stderr, "disgw: %v\n", err)
			return exitUsage
		}
	}
	var errs []error
	if err := cfg.ApplyLookupEnv(lookupEnv); err != nil {
		errs = append(errs, err)
	}
	fs.Visit(func(f *flag.Flag) {
		if key, ok := flagKey(f.Name); ok {
			if err := cfg.Set(key, f.Value.String()); err != nil {
				errs = append(errs, fmt.Errorf("--%s: %w", f.Name, err))
			}
		}
	})
	if err := cfg.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		fmt.Fprintf(stderr, "disgw: invalid configuration:\n%v\n", err)
		return exitUsage
	}

	log, err := newLogger(cfg.LogLevel, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "disgw: %v\n", err)
		return exitUsage
	}
	defer log.Sync() //nolint:errcheck // nothing to do if stderr cannot sync
	// The console's recent errors: every warning and error logged.
	ring := admin.NewErrorRing(recentErrors)
	log = log.WithOptions(zap.WrapCore(ring.Core))
	for _, problem := range configs.UnknownEnv(os.Environ()) {
		log.Warn(problem)
	}

	if err := runGateway(cfg, *readyFile, log, ring); err != nil {
		log.Error("failed", zap.Error(err))
		return exitError
	}
	return exitOK
}

// runGateway checks the ports, opens the store, serves until SIGTERM or
// SIGINT, then shuts the server down (in-flight requests finish), closes
// the store (syncing it) and returns.
func runGateway(cfg configs.Config, readyFile string, log *zap.Logger, ring *admin.ErrorRing) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	// A busy port fails the start before the store is created or opened.
	if err := checkPorts(cfg); err != nil {
		return err
	}

	var creds configs.DISCredentials
	if cfg.Backend == configs.BackendDIS {
		var err error
		if creds, err = disCredentials(cfg, log); err != nil {
			return err
		}
	}
	m := metrics.New(metricsOptions(cfg))
	store, err := openBackend(cfg, creds, log, m)
	if err != nil {
		return err
	}
	storeOpen := true
	defer func() {
		if storeOpen { // an early return: close it anyway
			_ = store.Close()
		}
	}()

	gcfg := gatewayConfig(cfg)
	gcfg.Metrics = m
	if err := saslUsers(cfg, &gcfg); err != nil {
		return err
	}
	if err := clusterForwarding(cfg, creds, &gcfg, log); err != nil {
		return err
	}
	srv, err := gateway.New(gcfg, store, log)
	if err != nil {
		return err
	}
	if err := srv.Listen(); err != nil {
		return err
	}
	clusterFailed, err := startCluster(ctx, cfg, srv, store)
	if err != nil {
		_ = srv.Shutdown(context.Background())
		return err
	}
	var adm *admin.Server
	if cfg.AdminListen != "" {
		if adm, err = admin.New(adminOptions(cfg, srv, store, m, ring, log)); err == nil {
			err = adm.Listen()
		}
		if err != nil {
			_ = srv.Shutdown(context.Background())
			return err
		}
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve() }()
	adminServed := make(chan error, 1)
	if adm != nil {
		go func() { adminServed <- adm.Serve() }()
	}

	log.Info("started", startedFields(cfg, creds, srv, adm)...)
	log.Debug("configuration", zap.Object("config", effectiveConfig(cfg)))

	if readyFile != "" {
		if err := writeFileAtomic(readyFile, srv.AdvertisedAddr()+"\n"); err != nil {
			_ = srv.Shutdown(context.Background())
			<-served
			if adm != nil {
				_ = adm.Shutdown(context.Background())
				<-adminServed
			}
			return fmt.Errorf("ready file: %w", err)
		}
		defer os.Remove(readyFile)
	}

	var serveErr, clusterErr error
	serveDone := false
	select {
	case <-ctx.Done():
		// A second signal now kills the process (the default action).
		stop()
		log.Info("shutting down", zap.Duration("grace", cfg.ShutdownGrace))
	case serveErr = <-served:
		serveDone = true
	case clusterErr = <-clusterFailed:
		clusterErr = fmt.Errorf("cluster: %w", clusterErr)
		log.Info("shutting down", zap.Duration("grace", cfg.ShutdownGrace))
	}
	// /readyz answers 503 from now on, while in-flight requests finish.
	if adm != nil {
		adm.SetShuttingDown()
	}
	// In cluster mode the node first leaves the nodes' group and serves
	// on, owning nothing, while the others take its partitions and groups
	// over (docs/cluster.md §8), so that clients move instead of failing
	// to connect.
	if r, ok := store.(resigner); ok && cfg.Cluster && cfg.ClusterControlledShutdown && clusterErr == nil {
		most := min(cfg.ClusterJoinWindow+cfg.ClusterSettle+2*cfg.ClusterHeartbeat+time.Second, cfg.ShutdownGrace/2)
		srv.Resigning()
		waited := r.Resign(most)
		log.Info("left the nodes' group; served the others' takeover before stopping", zap.Duration("waited", waited),
			zap.Duration("at_most", most))
	}
	// Shutdown waits up to the shutdown grace for in-flight requests, then
	// closes the connections; it does not close the store.
	shutdownErr := srv.Shutdown(context.Background())
	if adm != nil {
		actx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = adm.Shutdown(actx)
		cancel()
		if err := <-adminServed; err != nil {
			log.Warn("admin listener failed", zap.Error(err))
		}
	}
	if !serveDone {
		serveErr = <-served
	}
	storeOpen = false
	closeErr := store.Close()
	if shutdownErr != nil {
		shutdownErr = fmt.Errorf("shutdown: %w", shutdownErr)
	}
	if closeErr != nil {
		closeErr = fmt.Errorf("close store: %w", closeErr)
	}
	if err := errors.Join(clusterErr, serveErr, shutdownErr, closeErr); err != nil {
		return err
	}
	log.Info("stopped")
	return nil
}

// gatewayConfig maps cfg onto the gateway's configuration (configs does
// not import gateway): gateway.DefaultConfig, then every setting copied
// onto the gateway.Config field it fills (configs.Setting.GatewayField: the
// field of the same name, or the one its gateway tag names), then the
// settings that need code: a derived value, a list, or a value for one
// backend only.
func gatewayConfig(cfg configs.Config) gateway.Config {
	g := gateway.DefaultConfig()
	gv := reflect.ValueOf(&g).Elem()
	for _, s := range configs.Settings() {
		path, ok, err := s.GatewayField(func(path string) bool { return gatewayField(gv, path).IsValid() })
		if err != nil {
			panic(err) // a wrong tag: TestGatewayConfigMapsEverySetting names it
		}
		if ok {
			copySetting(gatewayField(gv, path), cfg.Value(s), s.Key)
		}
	}
	g.DefaultRetention = cfg.RetentionDefault()
	g.SuperUsers = cfg.SuperUserList()
	if cfg.Backend == configs.BackendDIS {
		g.MetadataRefresh = cfg.DISMetadataRefresh
	}
	if ls, err := cfg.Listeners(); err == nil && strings.TrimSpace(cfg.ListenersList) != "" {
		for _, l := range ls {
			g.Listeners = append(g.Listeners, gateway.Listener{Name: l.Name, SecurityProtocol: l.SecurityProtocol, Listen: l.Listen, Advertise: l.Advertise})
		}
	}
	g.SASL.Mechanisms = cfg.EnabledSASLMechanisms()
	g.SASL.PlainDIS = cfg.SASLPlainAuthentication == configs.SASLPlainDIS
	return g
}

// gatewayField returns the field of the struct v at the dotted path
// ("Limits.MaxTopics"), or the zero Value when there is none.
func gatewayField(v reflect.Value, path string) reflect.Value {
	for name := range strings.SplitSeq(path, ".") {
		if v.Kind() != reflect.Struct {
			return reflect.Value{}
		}
		if v = v.FieldByName(name); !v.IsValid() {
			return v
		}
	}
	return v
}

// copySetting sets dst to the value of setting key, converting between
// numbers (int32 to int); other kinds must match. A mismatch panics:
// TestGatewayConfigMapsEverySetting names it.
func copySetting(dst, src reflect.Value, key string) {
	number := func(k reflect.Kind) bool {
		return k >= reflect.Int && k <= reflect.Int64 || k == reflect.Float32 || k == reflect.Float64
	}
	if src.Kind() != dst.Kind() && !(number(src.Kind()) && number(dst.Kind())) {
		panic(fmt.Sprintf("setting %s: a %s cannot fill a gateway.Config field of type %s; tag it gateway:\"-\" and map it in gatewayConfig", key, src.Type(), dst.Type()))
	}
	dst.Set(src.Convert(dst.Type()))
}

// metricsOptions maps cfg onto the metrics' options.
func metricsOptions(cfg configs.Config) metrics.Options {
	return metrics.Options{MaxTopics: int(cfg.MetricsMaxTopics), MaxGroups: int(cfg.MetricsMaxGroups)}
}

// saslUsers reads sasl_users_file into g.SASL.Users.
func saslUsers(cfg configs.Config, g *gateway.Config) error {
	users, err := cfg.SASLUsers()
	if err != nil {
		return err
	}
	for _, u := range users {
		g.SASL.Users = append(g.SASL.Users, gateway.SASLUser{Mechanism: u.Mechanism, Name: u.Name, Password: u.Password})
	}
	return nil
}

// disCredentials resolves the DIS credentials (dis_ak/dis_sk or dis_token
// over dis_credentials_file) and logs, never a secret, a credentials file
// open to group or others, or one not read because dis_ak or dis_token was
// given.
func disCredentials(cfg configs.Config, log *zap.Logger) (configs.DISCredentials, error) {
	creds, err := cfg.DISCredentials()
	if err != nil {
		return creds, err
	}
	if creds.Warning != "" {
		log.Warn(creds.Warning, zap.String("dis_credentials_file", creds.File))
	}
	if creds.Source != configs.CredentialsFromFile && creds.File != "" {
		log.Info("dis_credentials_file not read: "+creds.Source+" takes precedence",
			zap.String("dis_credentials_file", creds.File))
	}
	return creds, nil
}

// openBackend opens the configured backend: the embedded store in
// cfg.Data, or DIS with creds.
func openBackend(cfg configs.Config, creds configs.DISCredentials, log *zap.Logger, m *metrics.Metrics) (disbackend.Backend, error) {
	if cfg.Backend == configs.BackendDIS {
		log.Info("connecting to DIS", zap.String("dis_endpoint", cfg.DISEndpoint), zap.String("dis_project_id", creds.ProjectID))
		s, err := disrest.New(disrestOptions(cfg, creds, log, m))
		if err != nil {
			return nil, err
		}
		if c := s.Cluster(); c != nil {
			return clusterBackend{Store: s, clusterMember: c.(clusterMember)}, nil
		}
		return s, nil
	}
	if err := checkDataDir(cfg.Data); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.Data, 0o700); err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	return localstore.Open(cfg.Data, localstoreOptions(cfg, log, m))
}

// startCluster starts cluster mode (docs/cluster.md) once the gateway
// listens, so that its advertised listeners are known (a port 0 is bound
// by then): the DIS backend checks that DIS fences stale group members and
// joins the other nodes. The channel receives the error that stops the
// membership later (another node holds this node_id); nil without
// cluster mode.
func startCluster(ctx context.Context, cfg configs.Config, srv *gateway.Server, store disbackend.Backend) (<-chan error, error) {
	if !cfg.Cluster {
		return nil, nil
	}
	ds, ok := store.(clusterBackend)
	if !ok {
		return nil, errors.New("cluster mode needs backend dis")
	}
	if err := ds.StartCluster(ctx, advertisedListeners(cfg, srv)); err != nil {
		return nil, err
	}
	return ds.ClusterFailed(), nil
}

// clusterBackend is the DIS backend in cluster mode as the gateway and
// the admin listener see it: the Store, and its membership's view
// (disbackend.Cluster), which the gateway answers Kafka's view from, and
// status (disbackend.ClusterStatusReporter: the lease, which /readyz and
// the console show). The Store alone does not implement
// disbackend.Cluster, so that one node answers as before.
type clusterBackend struct {
	*disrest.Store
	clusterMember
}

// resigner is a backend whose cluster membership can be left ahead of its
// Close (disrest.Store.Resign).
type resigner interface {
	Resign(most time.Duration) time.Duration
}

// clusterMember is what disrest's membership gives (Store.Cluster).
type clusterMember interface {
	disbackend.Cluster
	disbackend.ClusterStatusReporter
}

// advertisedListeners are the gateway's advertised addresses (HOST:PORT)
// by listener name, as Metadata answers them.
func advertisedListeners(cfg configs.Config, srv *gateway.Server) map[string]string {
	out := map[string]string{}
	ls, err := cfg.Listeners()
	if err != nil {
		return out
	}
	for _, l := range ls {
		if a := srv.ListenerAddr(l.Name); a != "" {
			out[l.Name] = a
		}
	}
	return out
}

// clusterForwarding gives the gateway, in cluster mode, the key that
// authenticates the admin writes nodes forward to the controller
// (docs/cluster.md §7): HMAC-SHA256 of a fixed label under
// cluster_secret, else under dis_sk, which the nodes of one DIS project
// share; with neither (dis_token alone) nothing is forwarded, and a line
// says so. Forwarding over an SSL or SASL_SSL listener verifies the
// controller's certificate against the system's CAs and
// tls_client_ca_file.
func clusterForwarding(cfg configs.Config, creds configs.DISCredentials, g *gateway.Config, log *zap.Logger) error {
	if !cfg.Cluster {
		return nil
	}
	secret := cmp.Or(cfg.ClusterSecret, creds.SK)
	if secret == "" {
		log.Warn("cluster: no cluster_secret and no dis_sk: admin writes reaching a node other than the controller are answered NOT_CONTROLLER")
		return nil
	}
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte("disgw cluster forwarding v1"))
	g.ClusterKey = mac.Sum(nil)
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	if cfg.TLSClientCAFile != "" {
		pem, err := os.ReadFile(cfg.TLSClientCAFile)
		if err != nil {
			return fmt.Errorf("cluster: %w", err)
		}
		pool.AppendCertsFromPEM(pem)
	}
	g.ClusterTLS = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return nil
}

// disrestOptions maps cfg and creds onto the DIS backend's options.
func disrestOptions(cfg configs.Config, creds configs.DISCredentials, log *zap.Logger, m *metrics.Metrics) disrest.Options {
	return disrest.Options{
		Endpoint: cfg.DISEndpoint, Region: cfg.DISRegion, ProjectID: creds.ProjectID,
		AK: creds.AK, SK: creds.SK, SecurityToken: creds.SecurityToken, Token: creds.Token,
		RecordFormat: cfg.DISRecordFormat, Logger: log,
		Linger:     disLinger(cfg.DISLinger),
		BatchBytes: int(cfg.DISBatchBytes), BatchCount: int(cfg.DISBatchCount),
		BufferBytes:         int(cfg.DISBufferBytes),
		CompactionMaxKeys:   int(cfg.DISCompactionMaxKeys),
		PrincipalClients:    int(cfg.DISPrincipalClients),
		PrincipalTTL:        cfg.DISPrincipalTTL,
		ProducerStateExpiry: cfg.ProducerIDExpiration,
		RequestTimeout:      cfg.DISRequestTimeout,
		Metrics:             m,
		Cluster:             cfg.Cluster, NodeID: cfg.NodeID, Version: version,
		ClusterHeartbeat: cfg.ClusterHeartbeat, ClusterJoinWindow: cfg.ClusterJoinWindow,
		ClusterSettle: cfg.ClusterSettle, ClusterLease: cfg.ClusterLease,
		ClusterRebalanceInterval: cfg.ClusterRebalanceInterval,
	}
}

// localstoreOptions maps cfg onto the embedded store's options.
func localstoreOptions(cfg configs.Config, log *zap.Logger, m *metrics.Metrics) localstore.Options {
	return localstore.Options{
		MinFreeBytes:           offIfZero(cfg.StorageMinFreeBytes),
		BallastBytes:           offIfZero(cfg.StorageBallastBytes),
		Metrics:                m,
		Logger:                 log,
		RetentionCheckInterval: cfg.RetentionCheckInterval,
		CleanerInterval:        cfg.CleanerCheckInterval,
		CleanerBufferBytes:     cfg.CleanerDedupeBufferBytes,
		ProducerStateExpiry:    cfg.ProducerIDExpiration,
		MaxUnindexedBytes:      cfg.MaxUnindexedBytes,
	}
}

// offIfZero maps a setting's 0 (off) onto the store's option for off, -1
// (its 0 means the default).
func offIfZero(n int64) int64 {
	if n == 0 {
		return -1
	}
	return n
}

// recentErrors is how many warnings and errors the console keeps.
const recentErrors = 200

// adminOptions maps cfg onto the admin listener's options. When the
// gateway authenticates Kafka clients (a SASL listener or SASL users), the
// admin listener asks for HTTP basic authentication with the same users
// and passwords (PLAIN users, SCRAM credentials); else it has none.
func adminOptions(cfg configs.Config, srv *gateway.Server, store disbackend.Backend, m *metrics.Metrics, ring *admin.ErrorRing, log *zap.Logger) admin.Options {
	var kv []admin.KV
	for _, e := range cfg.Effective() {
		kv = append(kv, admin.KV{Key: e.Key, Value: e.Value})
	}
	o := adminSettings(cfg)
	o.Gateway, o.Backend, o.BackendName, o.Metrics = srv, store, cfg.Backend, m
	o.Config, o.Errors, o.Version, o.Logger = kv, ring, version, log
	if srv.HasUsers() {
		// With the authorizer on, only super users: the console and
		// /metrics show every topic and group, which ACLs would hide.
		supers := map[string]bool{}
		for _, u := range cfg.SuperUserList() {
			supers[u] = true
		}
		o.Auth = func(user, password string) bool {
			if cfg.Authorizer && !supers["User:"+user] {
				return false
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			return srv.CheckPassword(ctx, user, password)
		}
	}
	return o
}

// adminSettings are the admin listener's options that settings give.
func adminSettings(cfg configs.Config) admin.Options {
	return admin.Options{Listen: cfg.AdminListen, TLSCertFile: cfg.AdminTLSCertFile, TLSKeyFile: cfg.AdminTLSKeyFile,
		LagInterval: cfg.MetricsLagInterval}
}

// startedFields are the fields of the started line: what a reader looks
// for first. version; listen (the first Kafka listener's bound address)
// and advertise, and with named listeners every listener as
// NAME://ADVERTISED; backend, then the data directory, or the DIS
// endpoint, project and where the credentials came from (backendFields);
// admin_listen when the admin listener is on. The full configuration is
// the debug line "configuration" and the console's config page.
func startedFields(cfg configs.Config, creds configs.DISCredentials, srv *gateway.Server, adm *admin.Server) []zap.Field {
	fields := []zap.Field{
		zap.String("version", version),
		zap.String("listen", srv.Addr().String()),
		zap.String("advertise", srv.AdvertisedAddr())}
	if ls, err := cfg.Listeners(); err == nil && strings.TrimSpace(cfg.ListenersList) != "" {
		var named []string
		for _, l := range ls {
			named = append(named, l.Name+"://"+srv.ListenerAddr(l.Name))
		}
		fields = append(fields, zap.String("listeners", strings.Join(named, ",")))
	}
	fields = append(fields, zap.String("backend", cfg.Backend))
	fields = append(fields, backendFields(cfg, creds)...)
	if adm != nil {
		fields = append(fields, zap.String("admin_listen", adm.Addr().String()))
	}
	return fields
}

// effectiveConfig is every configuration key for the debug line
// "configuration", the secrets masked (configs.Config.Effective).
func effectiveConfig(cfg configs.Config) zapcore.ObjectMarshaler {
	return zapcore.ObjectMarshalerFunc(func(enc zapcore.ObjectEncoder) error {
		for _, e := range cfg.Effective() {
			enc.AddString(e.Key, e.Value)
		}
		return nil
	})
}

// disLinger maps dis_linger to disrest.Options.Linger, where 0 means the
// default and < 0 sends at once.
func disLinger(d time.Duration) time.Duration {
	if d <= 0 {
		return -1
	}
	return d
}

// backendFields are where the backend keeps data, for the start-up log,
// and on DIS where the credentials came from (dis_ak, dis_token, or the
// credentials file's path); never a credential.
func backendFields(cfg configs.Config, creds configs.DISCredentials) []zap.Field {
	if cfg.Backend == configs.BackendDIS {
		from := creds.Source
		if from == configs.CredentialsFromFile {
			from = creds.File
		}
		return []zap.Field{zap.String("dis_endpoint", cfg.DISEndpoint), zap.String("dis_project_id", creds.ProjectID),
			zap.String("dis_credentials", from)}
	}
	return []zap.Field{zap.String("data", cfg.Data)}
}

// writeFileAtomic writes text to path through a temporary file and a
// rename, so a reader never sees a partial address.
func writeFileAtomic(path, text string) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.WriteString(text); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// newLogger returns a zap logger at level writing to w: JSON, or the console
// encoder when w is a terminal.
func newLogger(level string, w io.Writer) (*zap.Logger, error) {
	lvl, err := zapcore.ParseLevel(level)
	if err != nil {
		return nil, err
	}
	enc := zap.NewProductionEncoderConfig()
	enc.EncodeTime = zapcore.ISO8601TimeEncoder
	enc.EncodeDuration = zapcore.StringDurationEncoder
	var encoder zapcore.Encoder
	if isTerminal(w) {
		enc.EncodeLevel = zapcore.CapitalColorLevelEncoder
		encoder = zapcore.NewConsoleEncoder(enc)
	} else {
		encoder = zapcore.NewJSONEncoder(enc)
	}
	core := zapcore.NewCore(encoder, zapcore.Lock(zapcore.AddSync(w)), lvl)
	return zap.New(core, zap.AddCaller(), zap.ErrorOutput(zapcore.Lock(zapcore.AddSync(w)))), nil
}

// isTerminal reports whether w is a character device such as a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
