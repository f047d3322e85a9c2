package engine

// A batch operator (docs/design.md, "Pipeline operators and
// expressions", lookup): stateless, it gathers the records it is pushed
// and hands them to its function together, up to size at a time, so
// that the function can serve them with one round trip (a lookup join's
// `WHERE id = ANY($1)`). Every control message flushes the batch first:
// the records before a barrier are handled, and their outputs emitted,
// before the barrier goes on and is acked, so a checkpoint never holds a
// record in flight; a watermark or the end of the stream passes no record
// either. The input going idle (ctlFlush) flushes too, so a partial batch
// waits no longer than the next poll. Records come out in input order.

type batchOp[T, U any] struct {
	stateless
	size int
	f    func([]T) error
	buf  []T
	out  input[U]
}

func (b *batchOp[T, U]) push(x T) {
	b.buf = append(b.buf, x)
	if len(b.buf) >= b.size {
		b.flush()
	}
}

func (b *batchOp[T, U]) flush() {
	if len(b.buf) == 0 {
		return
	}
	err := b.f(b.buf)
	clear(b.buf) // hold on to no record
	b.buf = b.buf[:0]
	if err != nil {
		fail(err)
	}
}

func (b *batchOp[T, U]) control(c ctl) {
	b.flush()
	b.barrier(c)
	b.out.control(c)
}

// AddBatch adds a stateless operator that handles records in batches of
// up to size (at least 1): build makes, per subtask, the function called
// with each batch, given where it emits. An error it returns fails the
// task (the restart strategy decides), so a batch is never passed on
// half handled. impl, when not nil, is the node's value for optional
// interfaces (a flow.MetricsReporter).
func AddBatch[T, U any](in *Node, size int, build func(out Input[U]) func([]T) error, impl any, opts ...NodeOption) *Node {
	if size < 1 {
		size = 1
	}
	n := &Node{name: "batch", kind: kindOp, inputs: []*Node{in}, fanout: typedFanout[U], impl: impl}
	n.chain = func(st *subtask, n *Node, out any) any {
		o := out.(input[U])
		op := &batchOp[T, U]{stateless: newStateless(st, n), size: size, f: build(Input[U]{o}), buf: make([]T, 0, size), out: o}
		return mark[T](st, n, op)
	}
	n.exchanges = exchangesOf(rebalanceOf[T])
	return in.g.add(n, opts)
}
