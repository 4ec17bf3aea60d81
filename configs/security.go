package configs

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"slices"
	"strings"
)

// SecurityProtocols are Kafka's listener security protocols.
var SecurityProtocols = []string{"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"}

// SASLMechanisms are the mechanisms sasl_enabled_mechanisms accepts.
var SASLMechanisms = []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}

// Values of sasl_plain_authentication.
const (
	// SASLPlainUsers checks PLAIN against the users of sasl_users_file.
	SASLPlainUsers = "users"
	// SASLPlainDIS takes PLAIN's username and password as a DIS AK and
	// SK, checked against DIS; the connection acts with them.
	SASLPlainDIS = "dis"
)

// TLSClientAuths are the values tls_client_auth accepts (Kafka
// ssl.client.auth).
var TLSClientAuths = Values("tls_client_auth")

// ListenerSpec is one listener of the listeners key, with its advertised
// address (advertised_listeners; empty: the bound address) and security
// protocol (listener_security_protocol_map).
type ListenerSpec struct {
	Name, SecurityProtocol, Listen, Advertise string
}

// parseListenerList reads Kafka's "NAME://HOST:PORT,..." form.
func parseListenerList(key, s string) ([]string, map[string]string, error) {
	var names []string
	addrs := map[string]string{}
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, addr, ok := strings.Cut(item, "://")
		if !ok || name == "" {
			return nil, nil, fmt.Errorf("%s: %q is not NAME://HOST:PORT", key, item)
		}
		name = strings.ToUpper(name)
		if _, dup := addrs[name]; dup {
			return nil, nil, fmt.Errorf("%s: listener %s given twice", key, name)
		}
		if err := checkHostPort(addr, key == "advertised_listeners"); err != nil {
			return nil, nil, fmt.Errorf("%s: %s: %q: %v", key, name, addr, err)
		}
		names = append(names, name)
		addrs[name] = addr
	}
	return names, addrs, nil
}

// Listeners returns the listeners of c: those of the listeners key, or
// when it is empty one PLAINTEXT listener on listen advertising
// advertise. A listener's protocol is listener_security_protocol_map's,
// else its name when that is a protocol (Kafka's default map).
func (c Config) Listeners() ([]ListenerSpec, error) {
	if strings.TrimSpace(c.ListenersList) == "" {
		if strings.TrimSpace(c.AdvertisedListeners) != "" {
			return nil, fmt.Errorf("advertised_listeners: needs listeners")
		}
		return []ListenerSpec{{Name: "PLAINTEXT", SecurityProtocol: "PLAINTEXT", Listen: c.Listen, Advertise: c.Advertise}}, nil
	}
	names, addrs, err := parseListenerList("listeners", c.ListenersList)
	if err != nil {
		return nil, err
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("listeners: no listener in %q", c.ListenersList)
	}
	_, adv, err := parseListenerList("advertised_listeners", c.AdvertisedListeners)
	if err != nil {
		return nil, err
	}
	for name := range adv {
		if _, ok := addrs[name]; !ok {
			return nil, fmt.Errorf("advertised_listeners: %s is not in listeners", name)
		}
	}
	protos := map[string]string{}
	for _, item := range strings.Split(c.ListenerSecurityProtocolMap, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, proto, ok := strings.Cut(item, ":")
		proto = strings.ToUpper(strings.TrimSpace(proto))
		if !ok || !slices.Contains(SecurityProtocols, proto) {
			return nil, fmt.Errorf("listener_security_protocol_map: %q is not NAME:PROTOCOL with PROTOCOL one of %s", item, strings.Join(SecurityProtocols, ", "))
		}
		protos[strings.ToUpper(strings.TrimSpace(name))] = proto
	}
	var out []ListenerSpec
	for _, name := range names {
		proto, ok := protos[name]
		if !ok {
			if !slices.Contains(SecurityProtocols, name) {
				return nil, fmt.Errorf("listener_security_protocol_map: no protocol for listener %s", name)
			}
			proto = name
		}
		out = append(out, ListenerSpec{Name: name, SecurityProtocol: proto, Listen: addrs[name], Advertise: adv[name]})
	}
	return out, nil
}

// SASLUserSpec is one user of sasl_users_file.
type SASLUserSpec struct {
	Mechanism, Name, Password string
}

// SASLUsers reads sasl_users_file: one user per line, "MECHANISM NAME
// PASSWORD" (the password is the rest of the line), blank lines and lines
// starting with # ignored. A file that others may read or write is
// refused: it holds passwords. Errors name the file and line, never a
// password.
func (c Config) SASLUsers() ([]SASLUserSpec, error) {
	if c.SASLUsersFile == "" {
		return nil, nil
	}
	fi, err := os.Stat(c.SASLUsersFile)
	if err != nil {
		return nil, fmt.Errorf("sasl_users_file: %w", err)
	}
	if fi.Mode().Perm()&0o006 != 0 {
		return nil, fmt.Errorf("sasl_users_file: %s is open to others (mode %v); chmod o-rw it", c.SASLUsersFile, fi.Mode().Perm())
	}
	b, err := os.ReadFile(c.SASLUsersFile)
	if err != nil {
		return nil, fmt.Errorf("sasl_users_file: %w", err)
	}
	var out []SASLUserSpec
	seen := map[[2]string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.SplitN(line, " ", 3)
		if len(f) != 3 || f[1] == "" || strings.TrimSpace(f[2]) == "" {
			return nil, fmt.Errorf("sasl_users_file %s line %d: want MECHANISM NAME PASSWORD", c.SASLUsersFile, n)
		}
		mech := strings.ToUpper(f[0])
		if !slices.Contains(SASLMechanisms, mech) {
			return nil, fmt.Errorf("sasl_users_file %s line %d: mechanism %q is not one of %s", c.SASLUsersFile, n, f[0], strings.Join(SASLMechanisms, ", "))
		}
		if seen[[2]string{mech, f[1]}] {
			return nil, fmt.Errorf("sasl_users_file %s line %d: %s user %q given twice", c.SASLUsersFile, n, mech, f[1])
		}
		seen[[2]string{mech, f[1]}] = true
		out = append(out, SASLUserSpec{Mechanism: mech, Name: f[1], Password: strings.TrimSpace(f[2])})
	}
	return out, sc.Err()
}

// EnabledSASLMechanisms returns sasl_enabled_mechanisms as a list.
func (c Config) EnabledSASLMechanisms() []string {
	var out []string
	for _, m := range strings.Split(c.SASLEnabledMechanisms, ",") {
		if m = strings.ToUpper(strings.TrimSpace(m)); m != "" {
			out = append(out, m)
		}
	}
	return out
}

// validateSecurity adds the problems across the listener, TLS and SASL
// keys.
func (c Config) validateSecurity(p *problems) {
	ls, err := c.Listeners()
	if err != nil {
		p.add("listeners", "%v", err)
	}
	var needTLS, needSASL bool
	for _, l := range ls {
		needTLS = needTLS || l.SecurityProtocol == "SSL" || l.SecurityProtocol == "SASL_SSL"
		needSASL = needSASL || strings.HasPrefix(l.SecurityProtocol, "SASL_")
	}
	if needTLS && (c.TLSCertFile == "" || c.TLSKeyFile == "") {
		p.add("tls_cert_file", "an SSL or SASL_SSL listener needs tls_cert_file and tls_key_file")
	}
	if c.TLSClientAuth == "required" && c.TLSClientCAFile == "" {
		p.add("tls_client_ca_file", "tls_client_auth required needs tls_client_ca_file")
	}
	mechs := c.EnabledSASLMechanisms()
	if needSASL && len(mechs) == 0 {
		p.add("sasl_enabled_mechanisms", "a SASL listener needs at least one mechanism")
	}
	if c.SASLPlainAuthentication == SASLPlainDIS {
		if c.Backend != BackendDIS {
			p.add("sasl_plain_authentication", "dis needs backend dis (it checks PLAIN's AK/SK against DIS)")
		}
		if !slices.Contains(mechs, "PLAIN") || !needSASL {
			p.add("sasl_plain_authentication", "dis needs PLAIN in sasl_enabled_mechanisms and a SASL_PLAINTEXT or SASL_SSL listener")
		}
	}
}
