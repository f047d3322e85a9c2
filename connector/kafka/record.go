package kafka

import (
	"fmt"
	"time"
)

// Header is a Kafka record header.
type Header struct {
	Key   string
	Value []byte
}

// Record is a Kafka record as a [Source] emits it and a [Sink] writes it.
type Record struct {
	// Topic is the topic the record was read from. For the sink, the topic
	// to write to when SinkConfig.Topic is empty.
	Topic string
	// Partition is the partition the record was read from. The sink uses
	// it only with SinkConfig.KeepPartition; otherwise the key decides.
	Partition int32
	// Offset is the record's offset; ignored by the sink.
	Offset    int64
	Key       []byte
	Value     []byte
	Headers   []Header
	Timestamp time.Time
}

// String names the record's position, for logs and errors.
func (r Record) String() string {
	return fmt.Sprintf("%s/%d@%d", r.Topic, r.Partition, r.Offset)
}
