package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestJavaToolsSASLSSL: the Java tools of Kafka 4.4 (the compat cache's
// jars) with a client.properties over SASL_SSL: kafka-configs adds a
// SCRAM-SHA-512 user (--alter --add-config 'SCRAM-SHA-512=[...]'
// --entity-type users) as the PLAIN admin and describes it; that user
// then produces and consumes with the console tools, also after the
// gateway restarts.
func TestJavaToolsSASLSSL(t *testing.T) {
	if testing.Short() {
		t.Skip("long: Kafka's Java tools, a JVM per step")
	}
	home, _ := os.UserHomeDir()
	jars := filepath.Join(home, ".cache", "disgw-compat", "kafka-4.4.0")
	if _, err := os.Stat(filepath.Join(jars, "kafka-tools-4.4.0.jar")); err != nil {
		t.Skip("Kafka 4.4 tools not in the compat cache (run compat/setup)")
	}
	java, err := exec.LookPath("java")
	if err != nil {
		t.Skip("java not installed")
	}
	dir := t.TempDir()
	p, addr, ca := startSASLSSL(t, dir)
	props := func(name, mech, user, pass string) string {
		path := filepath.Join(dir, name)
		module := "org.apache.kafka.common.security.scram.ScramLoginModule"
		if mech == "PLAIN" {
			module = "org.apache.kafka.common.security.plain.PlainLoginModule"
		}
		body := fmt.Sprintf("security.protocol=SASL_SSL\nsasl.mechanism=%s\nssl.truststore.type=PEM\nssl.truststore.location=%s\n"+
			"sasl.jaas.config=%s required username=\"%s\" password=\"%s\";\n", mech, ca, module, user, pass)
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	run := func(stdin string, class string, args ...string) string {
		t.Helper()
		cmd := exec.Command(java, append([]string{"-cp", filepath.Join(jars, "*"), class}, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		done := make(chan struct{})
		timer := time.AfterFunc(120*time.Second, func() { _ = cmd.Process.Kill() })
		defer func() { timer.Stop(); close(done) }()
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", class, strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	admin := props("admin.properties", "PLAIN", "admin", "admin-secret")
	run("", "org.apache.kafka.tools.ConfigCommand", "--bootstrap-server", addr, "--command-config", admin,
		"--alter", "--add-config", "SCRAM-SHA-512=[iterations=8192,password=java-secret-512]", "--entity-type", "users", "--entity-name", "javauser")
	out := run("", "org.apache.kafka.tools.ConfigCommand", "--bootstrap-server", addr, "--command-config", admin,
		"--describe", "--entity-type", "users", "--entity-name", "javauser")
	if !strings.Contains(out, "SCRAM-SHA-512=iterations=8192") {
		t.Fatalf("kafka-configs --describe: %s", out)
	}
	user := props("user.properties", "SCRAM-SHA-512", "javauser", "java-secret-512")
	run("a\nb\n", "org.apache.kafka.tools.ConsoleProducer", "--bootstrap-server", addr, "--topic", "java-sasl", "--command-config", user)
	if code := p.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	ready := filepath.Join(dir, "ready")
	_ = os.Remove(ready)
	// The SASL_SSL listener alone, on the same address and data.
	startGateway(t, gatewayOpts{listeners: "SASL_SSL://" + addr, data: filepath.Join(dir, "data"), ready: ready,
		env: []string{"DISGW_TLS_CERT_FILE=" + filepath.Join(dir, "server.pem"), "DISGW_TLS_KEY_FILE=" + filepath.Join(dir, "server.key"),
			"DISGW_SASL_USERS_FILE=" + filepath.Join(dir, "users")}})
	out = run("", "org.apache.kafka.tools.consumer.ConsoleConsumer", "--bootstrap-server", addr, "--topic", "java-sasl",
		"--from-beginning", "--max-messages", "2", "--timeout-ms", "60000", "--command-config", user)
	if !strings.Contains(out, "a\nb\n") {
		t.Fatalf("console consumer: %s", out)
	}
}
