package engine

import "sync"

// mailbox is an unbounded queue with a wake-up channel. The coordinator posts
// into subtasks' mailboxes; posting never blocks, so the coordinator can never
// deadlock against a subtask that is blocked on backpressure.
type mailbox[M any] struct {
	mu    sync.Mutex
	items []M
	wake  chan struct{}
}

// newMailbox returns an empty mailbox.
func newMailbox[M any]() *mailbox[M] { return &mailbox[M]{wake: make(chan struct{}, 1)} }

// Post appends m and wakes the reader.
func (b *mailbox[M]) Post(m M) {
	b.mu.Lock()
	b.items = append(b.items, m)
	b.mu.Unlock()
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// Wake returns the channel that receives a value after Post.
func (b *mailbox[M]) Wake() <-chan struct{} { return b.wake }

// Drain returns every posted message in order and empties the mailbox.
func (b *mailbox[M]) Drain() []M {
	b.mu.Lock()
	items := b.items
	b.items = nil
	b.mu.Unlock()
	return items
}
