package gateway

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"time"

	"go.uber.org/zap"
)

// Security protocols of a listener, as Kafka names them
// (listener.security.protocol.map).
const (
	ProtocolPlaintext     = "PLAINTEXT"
	ProtocolSSL           = "SSL"
	ProtocolSASLPlaintext = "SASL_PLAINTEXT"
	ProtocolSASLSSL       = "SASL_SSL"
)

// Listener is one named Kafka listener (an entry of Kafka's listeners,
// advertised.listeners and listener.security.protocol.map).
type Listener struct {
	// Name is the listener name, e.g. PLAINTEXT, INTERNAL, EXTERNAL.
	Name string
	// SecurityProtocol is PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL.
	SecurityProtocol string
	// Listen is the TCP address to bind, HOST:PORT.
	Listen string
	// Advertise is the HOST:PORT clients that connect to this listener
	// are given in Metadata, FindCoordinator and DescribeCluster; empty
	// means the bound address (an unspecified host advertises 127.0.0.1).
	Advertise string
}

func (l Listener) usesTLS() bool {
	return l.SecurityProtocol == ProtocolSSL || l.SecurityProtocol == ProtocolSASLSSL
}

func (l Listener) usesSASL() bool {
	return l.SecurityProtocol == ProtocolSASLPlaintext || l.SecurityProtocol == ProtocolSASLSSL
}

// TLSConfig is the TLS of the SSL and SASL_SSL listeners.
type TLSConfig struct {
	// CertFile and KeyFile are the PEM certificate chain and private key
	// of the server (Kafka ssl.keystore.location). They are read again
	// when either file's modification time changes, at the next
	// handshake.
	CertFile, KeyFile string
	// ClientCAFile is a PEM file of the CAs client certificates are
	// verified against (Kafka ssl.truststore.location); empty verifies
	// none.
	ClientCAFile string
	// ClientAuth is Kafka's ssl.client.auth: "none" (the default),
	// "requested" (a certificate is verified if given) or "required". It
	// applies to SSL listeners only: SASL_SSL listeners authenticate with
	// SASL and ask for no certificate, as Kafka's broker-wide
	// ssl.client.auth is ignored on SASL_SSL (KIP-684).
	ClientAuth string
}

// listener is one bound Listener.
type listener struct {
	Listener
	ln      net.Listener
	advHost string
	advPort int32
	tls     *tls.Config // nil without TLS
}

// listeners returns the configured listeners: Config.Listeners, or a
// single PLAINTEXT listener from Listen and Advertise.
func (c *Config) listeners() []Listener {
	if len(c.Listeners) > 0 {
		return c.Listeners
	}
	return []Listener{{Name: ProtocolPlaintext, SecurityProtocol: ProtocolPlaintext, Listen: c.Listen, Advertise: c.Advertise}}
}

// checkListeners validates the listener set: unique names, known
// protocols, TLS files where TLS is used, SASL mechanisms where SASL is.
func (c *Config) checkListeners() error {
	seen := map[string]bool{}
	for _, l := range c.listeners() {
		if l.Name == "" {
			return errors.New("gateway: a listener has no name")
		}
		if seen[l.Name] {
			return fmt.Errorf("gateway: listener %s given twice", l.Name)
		}
		seen[l.Name] = true
		switch l.SecurityProtocol {
		case ProtocolPlaintext, ProtocolSSL, ProtocolSASLPlaintext, ProtocolSASLSSL:
		default:
			return fmt.Errorf("gateway: listener %s: security protocol %q is not PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL", l.Name, l.SecurityProtocol)
		}
		if l.usesTLS() && (c.TLS.CertFile == "" || c.TLS.KeyFile == "") {
			return fmt.Errorf("gateway: listener %s (%s) needs a TLS certificate and key file", l.Name, l.SecurityProtocol)
		}
		if l.usesSASL() && len(c.SASL.Mechanisms) == 0 {
			return fmt.Errorf("gateway: listener %s (%s) needs at least one SASL mechanism", l.Name, l.SecurityProtocol)
		}
	}
	switch c.TLS.ClientAuth {
	case "", "none", "requested", "required":
	default:
		return fmt.Errorf("gateway: TLS client auth %q is not none, requested or required", c.TLS.ClientAuth)
	}
	if c.TLS.ClientAuth == "required" && c.TLS.ClientCAFile == "" {
		return errors.New("gateway: TLS client auth required needs a client CA file")
	}
	for _, m := range c.SASL.Mechanisms {
		if _, ok := saslMechanisms[m]; !ok {
			return fmt.Errorf("gateway: SASL mechanism %q is not PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", m)
		}
	}
	return nil
}

// bind binds l and fixes its advertised address.
func bind(l Listener, tlsConf *tls.Config) (*listener, error) {
	ln, err := net.Listen("tcp", l.Listen)
	if err != nil {
		return nil, fmt.Errorf("gateway: listener %s: listen on %s: %w", l.Name, l.Listen, err)
	}
	adv := l.Advertise
	if adv == "" {
		adv = ln.Addr().String()
	}
	host, portStr, err := net.SplitHostPort(adv)
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("gateway: listener %s: advertise address %q: %w", l.Name, adv, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port <= 0 || port > 65535 {
		ln.Close()
		return nil, fmt.Errorf("gateway: listener %s: advertise address %q: port must be 1-65535", l.Name, adv)
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	out := &listener{Listener: l, ln: ln, advHost: host, advPort: int32(port)}
	if l.usesTLS() {
		out.tls = tlsConf
	}
	return out, nil
}

// newTLSConfig returns the server TLS config of cfg: TLS 1.2 at least, the
// certificate reloaded when its files change, client certificates verified
// against ClientCAFile (read again when it changes, at the next handshake)
// as ClientAuth asks.
func newTLSConfig(cfg TLSConfig, log *zap.Logger) (*tls.Config, error) {
	kp := &keyPair{certFile: cfg.CertFile, keyFile: cfg.KeyFile, log: log}
	if _, err := kp.get(); err != nil {
		return nil, err
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return kp.get() }}
	switch cfg.ClientAuth {
	case "requested":
		tc.ClientAuth = tls.VerifyClientCertIfGiven
	case "required":
		tc.ClientAuth = tls.RequireAndVerifyClientCert
	}
	if cfg.ClientCAFile != "" {
		cas := &caPool{file: cfg.ClientCAFile, log: log}
		pool, err := cas.get()
		if err != nil {
			return nil, err
		}
		tc.ClientCAs = pool
		base := tc.Clone()
		tc.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
			pool, err := cas.get()
			if err != nil {
				return nil, err
			}
			c := base.Clone()
			c.ClientCAs = pool
			return c, nil
		}
	}
	return tc, nil
}

// caPool is the CA pool of a PEM file, read again when the file's
// modification time changes; a file that cannot be read or holds no
// certificate keeps the last good pool.
type caPool struct {
	file string
	log  *zap.Logger

	mu        sync.Mutex
	pool      *x509.CertPool
	mod       time.Time
	failedMod time.Time // of the last change that did not load (warned once)
}

func (c *caPool) get() (*x509.CertPool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m, err := modTime(c.file)
	if err == nil && c.pool != nil && m.Equal(c.mod) {
		return c.pool, nil
	}
	var pem []byte
	if err == nil {
		pem, err = os.ReadFile(c.file)
	}
	pool := x509.NewCertPool()
	if err == nil && !pool.AppendCertsFromPEM(pem) {
		err = fmt.Errorf("gateway: TLS client CA file %s holds no PEM certificate", c.file)
	}
	if err != nil {
		if c.pool != nil {
			if !m.Equal(c.failedMod) {
				c.failedMod = m
				c.log.Warn("TLS client CA file changed but cannot be read; the last good CAs stay in use", zap.String("file", c.file), zap.Error(err))
			}
			return c.pool, nil // keep the last good pool; try again at the next handshake
		}
		return nil, fmt.Errorf("gateway: TLS client CA file: %w", err)
	}
	if c.pool != nil {
		c.log.Info("TLS client CA file reloaded", zap.String("file", c.file))
	}
	c.pool, c.mod = pool, m
	return pool, nil
}

// keyPair is a certificate and key read from files, read again when
// either file's modification time changes.
type keyPair struct {
	certFile, keyFile string
	log               *zap.Logger

	mu      sync.Mutex
	cert    *tls.Certificate
	certMod time.Time
	keyMod  time.Time
	// of the last change that did not load (warned once)
	failedCertMod, failedKeyMod time.Time
}

func (k *keyPair) get() (*tls.Certificate, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	cm, err1 := modTime(k.certFile)
	km, err2 := modTime(k.keyFile)
	if err := errors.Join(err1, err2); err != nil {
		if k.cert != nil {
			return k.cert, nil // keep serving the last good pair
		}
		return nil, fmt.Errorf("gateway: TLS certificate: %w", err)
	}
	if k.cert != nil && cm.Equal(k.certMod) && km.Equal(k.keyMod) {
		return k.cert, nil
	}
	c, err := tls.LoadX509KeyPair(k.certFile, k.keyFile)
	if err != nil {
		if k.cert != nil {
			// A half-written pair: keep the last good one, try again
			// at the next handshake. The error names files, not keys.
			if !cm.Equal(k.failedCertMod) || !km.Equal(k.failedKeyMod) {
				k.failedCertMod, k.failedKeyMod = cm, km
				k.log.Warn("TLS certificate or key file changed but the pair does not load; the last good pair stays in use",
					zap.String("cert_file", k.certFile), zap.String("key_file", k.keyFile), zap.Error(err))
			}
			return k.cert, nil
		}
		return nil, fmt.Errorf("gateway: TLS certificate %s and key %s: %w", k.certFile, k.keyFile, err)
	}
	if k.cert != nil {
		k.log.Info("TLS certificate reloaded", zap.String("cert_file", k.certFile), zap.String("key_file", k.keyFile))
	}
	k.cert, k.certMod, k.keyMod = &c, cm, km
	return k.cert, nil
}

func modTime(path string) (time.Time, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return time.Time{}, err
	}
	return fi.ModTime(), nil
}

// certPrincipal is Kafka's default principal of a verified client
// certificate: "User:" and the subject's distinguished name in RFC 2253
// form, e.g. "User:CN=alice,OU=eng,O=example".
func certPrincipal(c *x509.Certificate) string {
	return "User:" + c.Subject.ToRDNSequence().String()
}

// BoundAddr returns the bound address of the listener named name, or ""
// when there is none.
func (s *Server) BoundAddr(name string) string {
	for _, l := range s.listeners {
		if l.Name == name {
			return l.ln.Addr().String()
		}
	}
	return ""
}
