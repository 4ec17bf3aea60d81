package disbackend

import (
	"fmt"
	"strings"
)

// MaxStreamNameLen is DIS's limit on stream names (1-64 characters of
// [A-Za-z0-9_-]).
const MaxStreamNameLen = 64

// MaxTopicNameLen is Kafka's limit on topic names (249 characters).
const MaxTopicNameLen = 249

// StreamNameForTopic maps a Kafka topic name to its DIS stream name: '.'
// becomes '_' (Kafka names allow [A-Za-z0-9._-], DIS names [A-Za-z0-9_-]).
// Two topics that map to one stream (a.b and a_b) collide; the backend refuses
// the second with ErrNameCollision, as Kafka refuses a.b beside a_b.
//
// Errors wrap ErrInvalidName (Kafka INVALID_TOPIC_EXCEPTION) and name the
// rule: empty, "." or "..", a character outside [A-Za-z0-9._-], or longer
// than MaxStreamNameLen characters.
func StreamNameForTopic(topic string) (string, error) {
	if err := ValidateTopicName(topic); err != nil {
		return "", err
	}
	if len(topic) > MaxStreamNameLen {
		return "", fmt.Errorf("%w: topic name %q is %d characters, longer than the %d that a DIS stream name allows",
			ErrInvalidName, topic, len(topic), MaxStreamNameLen)
	}
	return strings.ReplaceAll(topic, ".", "_"), nil
}

// ValidateTopicName applies Kafka's own topic name rules (Topic.validate in
// Apache Kafka): not empty, not "." or "..", at most MaxTopicNameLen
// characters of [A-Za-z0-9._-]. Errors wrap ErrInvalidName.
func ValidateTopicName(topic string) error {
	switch {
	case topic == "":
		return fmt.Errorf("%w: topic name is empty", ErrInvalidName)
	case topic == "." || topic == "..":
		return fmt.Errorf("%w: topic name cannot be %q", ErrInvalidName, topic)
	case len(topic) > MaxTopicNameLen:
		return fmt.Errorf("%w: topic name is longer than %d characters", ErrInvalidName, MaxTopicNameLen)
	}
	for i := 0; i < len(topic); i++ {
		c := topic[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("%w: topic name %q has character %q; allowed are ASCII letters, digits, '.', '_' and '-'",
				ErrInvalidName, topic, c)
		}
	}
	return nil
}

// PartitionID returns DIS's partition id for Kafka partition n:
// "shardId-" and n as 10 zero-padded digits.
func PartitionID(n int32) string { return fmt.Sprintf("shardId-%010d", n) }
