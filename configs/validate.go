package configs

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// LogLevels are the values LogLevel accepts.
var LogLevels = Values("log_level")

// RecordFormats are the values DISRecordFormat accepts.
var RecordFormats = Values("dis_record_format")

// problems collects Validate's problems, each "KEY: TEXT".
type problems struct {
	errs []error
	keys map[string]bool // the keys with a problem
}

func (p *problems) add(key, format string, args ...any) {
	p.errs = append(p.errs, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, args...)))
	if p.keys == nil {
		p.keys = map[string]bool{}
	}
	p.keys[key] = true
}

// ok reports whether key has no problem yet: a check across settings
// skips a value already refused on its own.
func (p *problems) ok(key string) bool { return !p.keys[key] }

// Validate returns every problem of c at once, joined: first those of each
// setting on its own (its range, values and check tags), then those across
// settings.
func (c Config) Validate() error {
	var p problems
	c.checkSettings(&p)
	c.validateSecurity(&p)
	c.validateDIS(&p)
	c.validateLimits(&p)
	if c.Cluster && c.Backend != BackendDIS {
		p.add("cluster", "needs backend dis: the nodes of a cluster share one DIS project (the embedded store is single-node)")
	}
	if (c.AdminTLSCertFile == "") != (c.AdminTLSKeyFile == "") {
		p.add("admin_tls_cert_file", "admin_tls_cert_file and admin_tls_key_file go together")
	}
	return errors.Join(p.errs...)
}

// validateDIS adds the problems of backend dis: the settings it requires,
// and the limits of DIS.
func (c Config) validateDIS(p *problems) {
	if c.Backend != BackendDIS {
		return
	}
	if strings.TrimSpace(c.DISEndpoint) == "" {
		p.add("dis_endpoint", "is required with backend dis (e.g. https://dis.cn-north-4.myhuaweicloud.com)")
	} else if u, err := url.Parse(c.DISEndpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		p.add("dis_endpoint", "%q is not an http:// or https:// URL with a host (e.g. https://dis.cn-north-4.myhuaweicloud.com)", c.DISEndpoint)
	}
	c.validateDISCredentials(p)
	if r := c.RetentionDefault(); r < 24*time.Hour || r > 168*time.Hour {
		p.add("default_retention", "%v: DIS keeps data 24h to 168h", r)
	}
	if p.ok("max_message_bytes") && c.MaxMessageBytes > DISMaxMessageBytes {
		p.add("max_message_bytes", "%d: with backend dis at most %d (DIS stores at most 1 MiB per record, envelope included)", c.MaxMessageBytes, DISMaxMessageBytes)
	}
}

// validateDISCredentials adds the problems of the project id and
// credentials backend dis needs.
func (c Config) validateDISCredentials(p *problems) {
	// The credentials file is read (and may give the project id) only
	// when neither dis_ak nor dis_token is given.
	fromFile := c.DISAK == "" && c.DISToken == "" && c.DISCredentialsFile != ""
	if strings.TrimSpace(c.DISProjectID) == "" && !fromFile {
		if c.DISCredentialsFile != "" {
			p.add("dis_project_id", "is required with backend dis: dis_credentials_file (and its project_id) is not read when dis_ak or dis_token is given")
		} else {
			p.add("dis_project_id", "is required with backend dis (or project_id in dis_credentials_file)")
		}
	}
	if (c.DISAK == "") != (c.DISSK == "") {
		p.add("dis_ak", "dis_ak and dis_sk go together (DISGW_DIS_AK, DISGW_DIS_SK)")
	}
	if c.DISAK == "" && c.DISToken == "" && c.DISCredentialsFile == "" {
		p.add("dis_ak", "backend dis needs credentials: DISGW_DIS_AK and DISGW_DIS_SK, DISGW_DIS_TOKEN, or dis_credentials_file")
	}
}

// validateLimits adds the problems of limits bound by other limits.
func (c Config) validateLimits(p *problems) {
	if p.ok("frame_read_timeout") && c.IdleTimeout > 0 && c.FrameReadTimeout > c.IdleTimeout {
		p.add("frame_read_timeout", "%v must be > 0 and at most idle_timeout", c.FrameReadTimeout)
	}
	if min := (int64(c.MaxFrameBytes)*8 + 6) / 7; c.QueuedMaxRequestBytes < min {
		p.add("queued_max_request_bytes", "%d must be at least max_frame_bytes·8/7 = %d (large requests may use seven eighths of it)", c.QueuedMaxRequestBytes, min)
	}
	if p.ok("max_decompressed_message_bytes") && c.MaxDecompressedMessageBytes > c.DecompressionBudgetBytes {
		p.add("max_decompressed_message_bytes", "%d is more than decompression_budget_bytes %d: such a batch could never be decoded", c.MaxDecompressedMessageBytes, c.DecompressionBudgetBytes)
	}
	if c.GroupMaxSessionTimeout < c.GroupMinSessionTimeout {
		p.add("group_max_session_timeout", "%v is below group_min_session_timeout %v", c.GroupMaxSessionTimeout, c.GroupMinSessionTimeout)
	}
}

// checkHostPort checks HOST:PORT. An advertised address needs a host other
// than an unspecified one and a port 1-65535; a listen address may leave the
// host empty or unspecified and use port 0 (any free port).
func checkHostPort(addr string, advertised bool) error {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return errors.New("want HOST:PORT")
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 0 || port > 65535 {
		return fmt.Errorf("port %q is not a number 0-65535", portStr)
	}
	if !advertised {
		return nil
	}
	if port == 0 {
		return errors.New("port 0 cannot be advertised; give the port clients connect to")
	}
	if host == "" {
		return errors.New("host is empty; give the host clients connect to")
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		return fmt.Errorf("%s cannot be advertised; give the host clients connect to", host)
	}
	return nil
}
