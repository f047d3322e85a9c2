package ast

// Temporary String methods so that the nodes satisfy Node before the
// parser's printer (branch sql-parser) lands; removed when it is merged.

func (n *ColumnRef) String() string { return n.Name.String() }
func (n *Literal) String() string   { return n.Value }
func (n *Interval) String() string  { return "INTERVAL '" + n.Value + "' " + n.Unit }
func (n *Unary) String() string     { return n.Op + " " + n.X.String() }
func (n *Binary) String() string    { return n.X.String() + " " + n.Op + " " + n.Y.String() }
func (n *Between) String() string   { return n.X.String() + " BETWEEN " + n.Lo.String() + " AND " + n.Hi.String() }
func (n *In) String() string        { return n.X.String() + " IN (…)" }
func (n *IsNull) String() string    { return n.X.String() + " IS NULL" }
func (n *IsBool) String() string    { return n.X.String() + " IS " + n.Value }
func (n *Case) String() string      { return "CASE … END" }
func (n *Cast) String() string      { return "CAST(" + n.X.String() + " AS " + n.To.Name + ")" }
func (n *Call) String() string      { return n.Name.String() + "(…)" }
func (n *Subscript) String() string { return n.X.String() + "[" + n.Index.String() + "]" }
func (n *Field) String() string     { return n.X.String() + "." + n.Name.Name }
func (n *Paren) String() string     { return "(" + n.X.String() + ")" }
func (n *Subquery) String() string  { return "(query)" }
func (n *Name) String() string {
	s := ""
	for i, p := range n.Parts {
		if i > 0 {
			s += "."
		}
		s += p.Name
	}
	return s
}
