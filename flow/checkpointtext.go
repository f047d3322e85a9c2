package flow

import (
	"strconv"
	"strings"
)

// CheckpointText prints a checkpoint id for people. With
// FencedCheckpointIDs (scale-out tasks) an id is epoch<<32 | sequence
// (docs/design.md, "Scale-out": fenced checkpoint ids), printed
// "epoch:sequence": 150323855954 is "35:18". An id below 1<<32 is
// printed as it is. ParseCheckpointText reads either form back.
func CheckpointText(id int64) string {
	if id < 1<<32 {
		return strconv.FormatInt(id, 10)
	}
	return strconv.FormatInt(id>>32, 10) + ":" + strconv.FormatInt(id&(1<<32-1), 10)
}

// ParseCheckpointText reads a checkpoint id as CheckpointText prints it,
// or as the plain number.
func ParseCheckpointText(s string) (int64, error) {
	e, q, ok := strings.Cut(s, ":")
	if !ok {
		return strconv.ParseInt(s, 10, 64)
	}
	epoch, err := strconv.ParseInt(e, 10, 32)
	if err != nil || epoch < 0 {
		return 0, &strconv.NumError{Func: "ParseCheckpointText", Num: s, Err: strconv.ErrSyntax}
	}
	seq, err := strconv.ParseUint(q, 10, 32)
	if err != nil {
		return 0, &strconv.NumError{Func: "ParseCheckpointText", Num: s, Err: strconv.ErrSyntax}
	}
	return epoch<<32 | int64(seq), nil
}
