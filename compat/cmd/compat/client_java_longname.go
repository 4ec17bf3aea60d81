package main

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/disgw/disgw/compat/internal/scen"
)

// stepJavaLongName is the kafka-java step for a topic name of 249
// characters, Kafka's limit (on DIS a hashed stream name, README "Topic
// names and DIS stream names").
const stepJavaLongName = "kafka-topics 249-character name"

// runJavaLongName creates a topic whose name is topic's, '.', and 'x' up
// to 249 characters with kafka-topics, finds it in --list and --describe,
// produces 3 lines with kafka-console-producer, reads them back with
// kafka-console-consumer --from-beginning and deletes it. java runs one
// Kafka tool class with --bootstrap-server and args.
func runJavaLongName(topic string, java func(timeout time.Duration, stdin, class string, args ...string) (string, error)) {
	scen.Run(stepJavaLongName, func() (string, error) {
		long := topic + "."
		long += strings.Repeat("x", 249-len(long))
		tool := func(timeout time.Duration, stdin, class string, args ...string) (string, error) {
			out, err := java(timeout, stdin, class, args...)
			if err != nil {
				return out, fmt.Errorf("%s %s: %v: %s", class[strings.LastIndexByte(class, '.')+1:], strings.Join(args, " "), err, tail(out, 300))
			}
			return out, nil
		}
		if _, err := tool(60*time.Second, "", javaTopicCommand, "--create", "--topic", long, "--partitions", "1", "--replication-factor", "1"); err != nil {
			return "", err
		}
		out, err := tool(60*time.Second, "", javaTopicCommand, "--list")
		if err != nil {
			return "", err
		}
		if !strings.Contains("\n"+out+"\n", "\n"+long+"\n") {
			return "", fmt.Errorf("kafka-topics --list does not list the %d-character topic: %s", len(long), tail(out, 300))
		}
		out, err = tool(60*time.Second, "", javaTopicCommand, "--describe", "--topic", long)
		if err != nil {
			return "", err
		}
		if !regexp.MustCompile(`Topic:\s*` + regexp.QuoteMeta(long) + `\s`).MatchString(out) {
			return "", fmt.Errorf("kafka-topics --describe does not name the topic: %s", tail(out, 300))
		}
		want := []string{"long-0", "long-1", "long-2"}
		if _, err := tool(90*time.Second, strings.Join(want, "\n")+"\n", javaConsoleProducer, "--topic", long); err != nil {
			return "", err
		}
		out, err = tool(consumeTimeout+15*time.Second, "", javaConsoleConsumer, "--topic", long, "--from-beginning",
			"--max-messages", fmt.Sprint(len(want)), "--timeout-ms", "30000")
		if err != nil {
			return "", err
		}
		if got := strings.Fields(out); strings.Join(got, ",") != strings.Join(want, ",") {
			return "", fmt.Errorf("kafka-console-consumer read %q, want %q", got, want)
		}
		if _, err := tool(60*time.Second, "", javaTopicCommand, "--delete", "--topic", long); err != nil {
			return "", err
		}
		return fmt.Sprintf("a %d-character topic: created, listed, described, %d records produced and consumed, deleted", len(long), len(want)), nil
	})
}
