package kafka

import (
	"errors"
	"fmt"
	"regexp"
)

// MaxTopicNameLength is the longest topic name Kafka accepts.
const MaxTopicNameLength = 249

// ValidateTopicName applies Kafka's topic name rules: not empty, at most
// MaxTopicNameLength characters, not "." or "..", and only letters,
// digits, '.', '_' and '-'. The error is a sentence naming the topic, such
// as `topic "a/b" may only use letters, digits, '.', '_' and '-'`.
func ValidateTopicName(name string) error {
	switch {
	case name == "":
		return errors.New("the topic name is empty")
	case len(name) > MaxTopicNameLength:
		return fmt.Errorf("topic %q is longer than Kafka's %d characters", name, MaxTopicNameLength)
	case name == "." || name == "..":
		return fmt.Errorf("%q is not a valid topic name", name)
	}
	for _, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
		default:
			return fmt.Errorf("topic %q may only use letters, digits, '.', '_' and '-'", name)
		}
	}
	return nil
}

// CompileTopicRegex compiles expr, a Go regular expression, the way
// SourceConfig.TopicRegex is matched: against the whole topic name, so
// "orders-.*" matches "orders-eu" but not "old-orders-eu". An invalid expr
// returns the regexp package's error about expr as it was written.
func CompileTopicRegex(expr string) (*regexp.Regexp, error) {
	if _, err := regexp.Compile(expr); err != nil {
		return nil, err
	}
	return regexp.Compile("^(?:" + expr + ")$")
}
