// Package query is quarry's query language: a lexer and parser with byte
// columns in every error, a template-aware planner and a per-record
// evaluator, and the count/top aggregations. It is a library: no I/O, no
// lake access. docs/query.md is the user's reference; this comment is the
// contract for readers that use it.
//
// Use:
//
//	q, err := query.Compile(src)       // *ParseError on a bad query
//	b := q.Bounds()                    // prune partitions and files by tenant and ts
//	p := q.PlanTemplates(tenant, tpls) // one decision per template version
//	for each template version tp in p.Templates():
//	    None: skip its rows (p.IDs() lists the others, for row-group stats)
//	    All:  every row matches; read only what the output needs
//	    Scan: read tp.Columns and call tp.Match(&rec) per row
//	a := q.NewAggregator()             // nil when the query returns lines
//	a.Add(&rec) / a.AddN(&rec, n), then a.Rows()
//
// Evaluation contract: for every record whose parameter count fits its
// template, Plan.Match (and TemplatePlan.Match
// for the record's template) returns exactly what Query.Match returns on
// the rendered line; the planner only moves work from records to templates.
// The planner assumes nothing about parameters beyond Template.ParamBytes:
// without it a parameter may hold any bytes, so a text term settles false
// only on templates without parameters. TestPlanEquivalence and FuzzQuery
// check the contract. Query.Match does not know template merges:
// template:N there compares the record's own id, while a plan also selects
// templates whose Template.Canonical is N.
//
// A Query, a Plan and its TemplatePlans are immutable and safe for
// concurrent use; an Aggregator belongs to one goroutine (Merge several).
package query
