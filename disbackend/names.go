package disbackend

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/disgw/disgw/disbackend/disapi"
)

// MaxStreamNameLen is DIS's limit on stream names (1-64 characters of
// [A-Za-z0-9_-]).
const MaxStreamNameLen = disapi.MaxStreamNameLen

// MaxTopicNameLen is Kafka's limit on topic names (249 characters).
const MaxTopicNameLen = 249

// StreamNameForTopic maps a Kafka topic name to its DIS stream name: '.'
// becomes '_' (Kafka names allow [A-Za-z0-9._-], DIS names [A-Za-z0-9_-]).
// A topic name longer than MaxStreamNameLen (64) characters, which no DIS
// stream name can hold, maps to a hashed name (HashedStreamName): its first
// 47 mapped characters, '-', and 16 hex digits of the SHA-256 of the topic
// name, 64 characters in all. A hashed name does not give the topic name
// back, so the DIS backend keeps the topic name in DIS beside the stream.
//
// Two topics that map to one stream (a.b and a_b, or a 64-character topic
// named like another's hashed stream) collide; the backend refuses the
// second with ErrNameCollision, as Kafka refuses a.b beside a_b.
//
// Errors wrap ErrInvalidName (Kafka INVALID_TOPIC_EXCEPTION) and name the
// rule ValidateTopicName found broken.
func StreamNameForTopic(topic string) (string, error) {
	name, err := PlainStreamNameForTopic(topic)
	if err != nil {
		return "", err
	}
	if len(name) > MaxStreamNameLen {
		return HashedStreamName(topic), nil
	}
	return name, nil
}

// HashedStreamNamePrefixLen is how many mapped characters of a long topic
// name its hashed stream name keeps (StreamNameForTopic): 64 less '-' and
// 16 hex digits.
const HashedStreamNamePrefixLen = MaxStreamNameLen - 1 - 16

// HashedStreamName returns the hashed stream name of topic (a valid topic
// name longer than MaxStreamNameLen): the first HashedStreamNamePrefixLen
// characters of topic with '.' as '_', '-', and the first 8 bytes of
// SHA-256 of topic with '.' as '_' as 16 lower-case hex digits. The hash is
// of the mapped name so that two long topics differing only in '.' and '_'
// map to one stream and the second collides (ErrNameCollision), as Kafka
// refuses them and as short names collide.
func HashedStreamName(topic string) string {
	mapped := strings.ReplaceAll(topic, ".", "_")
	sum := sha256.Sum256([]byte(mapped))
	prefix := mapped
	if len(prefix) > HashedStreamNamePrefixLen {
		prefix = prefix[:HashedStreamNamePrefixLen]
	}
	return prefix + "-" + hex.EncodeToString(sum[:8])
}

// PlainStreamNameForTopic maps a topic name to a stream name by '.' -> '_'
// alone, at any length up to MaxTopicNameLen: the embedded store's stream
// names (it has no 64-character limit), and DIS's for names of at most 64
// characters. Errors: those of ValidateTopicName (ErrInvalidName).
func PlainStreamNameForTopic(topic string) (string, error) {
	if err := ValidateTopicName(topic); err != nil {
		return "", err
	}
	return strings.ReplaceAll(topic, ".", "_"), nil
}

// StreamNamer is implemented by backends whose stream names are not DIS's
// (StreamNameForTopic); the embedded store's are PlainStreamNameForTopic's.
type StreamNamer interface {
	StreamNameForTopic(topic string) (string, error)
}

// StreamNameFor returns backend b's stream name for topic: b's own mapping
// when b is a StreamNamer, else StreamNameForTopic. Errors wrap
// ErrInvalidName (Kafka INVALID_TOPIC_EXCEPTION).
func StreamNameFor(b any, topic string) (string, error) {
	if n, ok := b.(StreamNamer); ok {
		return n.StreamNameForTopic(topic)
	}
	return StreamNameForTopic(topic)
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

// ParsePartitionID reverses PartitionID: it takes "shardId-" followed by 1
// to 10 decimal digits ("shardId-0000000003", "shardId-3"), or the digits
// alone ("3", which dislocal accepts from clients), of a value that fits an
// int32. ok is false for anything else: empty, a sign, other characters,
// more than 10 digits, a value above 2147483647.
func ParsePartitionID(id string) (n int32, ok bool) {
	digits := strings.TrimPrefix(id, "shardId-")
	if digits == "" || len(digits) > 10 {
		return 0, false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	v, err := strconv.ParseInt(digits, 10, 32)
	if err != nil {
		return 0, false
	}
	return int32(v), true
}

// MaxAppNameLen is DIS's limit on app names (1-200 characters of
// [A-Za-z0-9_-]).
const MaxAppNameLen = disapi.MaxAppNameLen

// AppNameForGroup maps a Kafka group id (any string) to a DIS app name,
// injectively and reversibly: ASCII letters, digits and '-' stay; every
// other byte, '_' included, becomes '_' and two upper-case hex digits (so
// "a.b" is "a_2Eb" and "a_b" is "a_5Fb"). A group id whose mapping would be
// longer than MaxAppNameLen keeps at most its first 182 mapped characters followed
// by '_', '_' and 16 hex digits of a SHA-256 of the group id; such a name
// is not reversible, so backends keep the original group id with the app
// (App.GroupID) and refuse a second group id for the same name
// (ErrNameCollision). Errors: ErrInvalidName for an empty group id.
func AppNameForGroup(group string) (string, error) {
	if group == "" {
		return "", fmt.Errorf("%w: group id is empty", ErrInvalidName)
	}
	const hexdigits = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(group); i++ {
		c := group[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('_')
		b.WriteByte(hexdigits[c>>4])
		b.WriteByte(hexdigits[c&15])
	}
	name := b.String()
	if len(name) <= MaxAppNameLen {
		return name, nil
	}
	sum := sha256.Sum256([]byte(group))
	cut := name[:182]
	// Do not cut an escape in half.
	if i := strings.LastIndexByte(cut, '_'); i >= len(cut)-2 {
		cut = cut[:i]
	}
	return cut + "__" + hex.EncodeToString(sum[:8]), nil
}

// GroupForAppName reverses AppNameForGroup for names that are not hashed;
// ok is false for hashed or foreign names (then use App.GroupID).
func GroupForAppName(name string) (group string, ok bool) {
	if strings.Contains(name, "__") {
		return "", false
	}
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c != '_' {
			b.WriteByte(c)
			continue
		}
		if i+2 >= len(name) {
			return "", false
		}
		v, err := strconv.ParseUint(name[i+1:i+3], 16, 8)
		if err != nil || name[i+1] >= 'a' || name[i+2] >= 'a' {
			return "", false
		}
		b.WriteByte(byte(v))
		i += 2
	}
	return b.String(), true
}
