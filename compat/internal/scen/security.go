package scen

import "os"

// Security is how a scenario connects when its row of the matrix runs
// disgw with a SASL or SSL listener: the driver sets it in the scenario
// process's environment (COMPAT_SECURITY_PROTOCOL, COMPAT_SASL_MECHANISM,
// COMPAT_SASL_USERNAME, COMPAT_SASL_PASSWORD, COMPAT_SSL_CA_FILE), with the
// names of Kafka's client configs (security.protocol, sasl.mechanism). The
// zero Security is PLAINTEXT.
type Security struct {
	// Protocol is PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL.
	Protocol string
	// Mechanism is PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (SASL_*).
	Mechanism          string
	Username, Password string
	// CAFile is the PEM file of the CA that signed disgw's certificate
	// (SSL, SASL_SSL).
	CAFile string
}

// SecurityFromEnv reads the Security the driver set.
func SecurityFromEnv() Security {
	s := Security{
		Protocol:  os.Getenv("COMPAT_SECURITY_PROTOCOL"),
		Mechanism: os.Getenv("COMPAT_SASL_MECHANISM"),
		Username:  os.Getenv("COMPAT_SASL_USERNAME"),
		Password:  os.Getenv("COMPAT_SASL_PASSWORD"),
		CAFile:    os.Getenv("COMPAT_SSL_CA_FILE"),
	}
	if s.Protocol == "" {
		s.Protocol = "PLAINTEXT"
	}
	return s
}

// TLS reports whether the protocol is SSL or SASL_SSL.
func (s Security) TLS() bool { return s.Protocol == "SSL" || s.Protocol == "SASL_SSL" }

// SASL reports whether the protocol is SASL_PLAINTEXT or SASL_SSL.
func (s Security) SASL() bool { return s.Protocol == "SASL_PLAINTEXT" || s.Protocol == "SASL_SSL" }

// Env is the environment that carries s to a scenario process.
func (s Security) Env() []string {
	return []string{"COMPAT_SECURITY_PROTOCOL=" + s.Protocol, "COMPAT_SASL_MECHANISM=" + s.Mechanism,
		"COMPAT_SASL_USERNAME=" + s.Username, "COMPAT_SASL_PASSWORD=" + s.Password, "COMPAT_SSL_CA_FILE=" + s.CAFile}
}

// LibrdkafkaConfig is s as librdkafka properties (kcat -X, confluent-kafka):
// empty for PLAINTEXT.
func (s Security) LibrdkafkaConfig() map[string]string {
	m := map[string]string{}
	if s.Protocol == "PLAINTEXT" {
		return m
	}
	m["security.protocol"] = s.Protocol
	if s.SASL() {
		m["sasl.mechanisms"] = s.Mechanism
		m["sasl.username"] = s.Username
		m["sasl.password"] = s.Password
	}
	if s.TLS() {
		m["ssl.ca.location"] = s.CAFile
	}
	return m
}

// JavaProperties is s as a Java client's client.properties (the console
// tools' --command-config, --producer.config, --consumer.config): the CA
// as a PEM truststore (KIP-651). Empty for PLAINTEXT.
func (s Security) JavaProperties() string {
	if s.Protocol == "PLAINTEXT" {
		return ""
	}
	p := "security.protocol=" + s.Protocol + "\n"
	if s.SASL() {
		p += "sasl.mechanism=" + s.Mechanism + "\n"
		module := "org.apache.kafka.common.security.plain.PlainLoginModule"
		if s.Mechanism != "PLAIN" {
			module = "org.apache.kafka.common.security.scram.ScramLoginModule"
		}
		p += "sasl.jaas.config=" + module + ` required username="` + s.Username + `" password="` + s.Password + "\";\n"
	}
	if s.TLS() {
		p += "ssl.truststore.type=PEM\nssl.truststore.location=" + s.CAFile + "\n"
	}
	return p
}
