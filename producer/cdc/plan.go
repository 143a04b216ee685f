package cdc

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/quarrylake/quarry/producer/sqlserver"
	"github.com/quarrylake/quarry/streams"
)

// columnPlan maps a capture instance's columns to a record.
type columnPlan struct {
	ci    sqlserver.CaptureInstance
	text  []int // column indexes; nil: whole row
	keys  []int
	attrs []int
	rest  []int // whole-row text columns
}

func newColumnPlan(ci sqlserver.CaptureInstance, t TableConfig) (columnPlan, error) {
	p := columnPlan{ci: ci}
	var errs []error
	idx := func(what, name string) int {
		i := ci.ColumnIndex(name)
		if i < 0 {
			var have []string
			for _, c := range ci.Columns {
				have = append(have, c.Name)
			}
			errs = append(errs, fmt.Errorf("%w: %s column %q is not captured by %s (captured: %s)", ErrColumn, what, name, ci.Name, strings.Join(have, ", ")))
		}
		return i
	}
	for _, n := range t.Text {
		p.text = append(p.text, idx("text", n))
	}
	for _, n := range t.Attrs {
		p.attrs = append(p.attrs, idx("attribute", n))
	}
	used := map[int]bool{}
	for _, k := range ci.KeyColumns {
		if i := ci.ColumnIndex(k); i >= 0 {
			p.keys = append(p.keys, i)
			used[i] = true
		}
	}
	for _, i := range p.attrs {
		used[i] = true
	}
	if len(t.Text) == 0 {
		for i := range ci.Columns {
			if !used[i] {
				p.rest = append(p.rest, i)
			}
		}
	}
	return p, errors.Join(errs...)
}

// record builds the record of a change or snapshot row.
func (p *columnPlan) record(t TableConfig, ts time.Time, op sqlserver.Operation, pos sqlserver.Position, vals []sqlserver.Value) streams.Record {
	r := streams.Record{}
	if !ts.IsZero() {
		// The commit time of the row's transaction (of the snapshot LSN
		// for a snapshot row) is the event time.
		r.TS, r.TSSource = ts.UnixNano(), streams.TSEvent
	}
	switch {
	case len(p.text) == 1:
		r.Text = vals[p.text[0]].Str
	case len(p.text) > 1:
		var b strings.Builder
		for j, i := range p.text {
			if j > 0 {
				b.WriteString(t.TextSeparator)
			}
			b.WriteString(vals[i].Str)
		}
		r.Text = b.String()
	default:
		var b strings.Builder
		for _, i := range p.rest {
			if vals[i].Null {
				continue
			}
			if b.Len() > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(p.ci.Columns[i].Name)
			b.WriteByte('=')
			b.WriteString(vals[i].Str)
		}
		r.Text = b.String()
	}
	attrs := make([]streams.Attr, 0, 4+len(p.keys)+len(p.attrs))
	attrs = append(attrs, streams.Attr{Key: "_op", Value: op.String()}, streams.Attr{Key: "_lsn", Value: pos.LSN.String()})
	if op != sqlserver.OpSnapshot {
		attrs = append(attrs, streams.Attr{Key: "_seqval", Value: pos.SeqVal.String()}, streams.Attr{Key: "_cmd", Value: strconv.FormatInt(pos.CommandID, 10)})
	}
	for _, i := range p.keys {
		if !vals[i].Null {
			attrs = append(attrs, streams.Attr{Key: p.ci.Columns[i].Name, Value: vals[i].Str})
		}
	}
	for _, i := range p.attrs {
		if !vals[i].Null {
			attrs = append(attrs, streams.Attr{Key: p.ci.Columns[i].Name, Value: vals[i].Str})
		}
	}
	r.Attrs = attrs
	return r
}

// positionOfRecord recovers a change position from a record's attributes
// (ok false for snapshot records or foreign records).
func positionOfRecord(r *streams.Record) (sqlserver.Position, bool) {
	var p sqlserver.Position
	var haveLSN, haveSeq, haveCmd, haveOp bool
	for _, a := range r.Attrs {
		var err error
		switch a.Key {
		case "_lsn":
			p.LSN, err = sqlserver.ParseLSN(a.Value)
			haveLSN = err == nil
		case "_seqval":
			p.SeqVal, err = sqlserver.ParseLSN(a.Value)
			haveSeq = err == nil
		case "_cmd":
			p.CommandID, err = strconv.ParseInt(a.Value, 10, 64)
			haveCmd = err == nil
		case "_op":
			for o := sqlserver.OpDelete; o <= sqlserver.OpUpdateAfter; o++ {
				if o.String() == a.Value {
					p.Op, haveOp = o, true
				}
			}
		}
	}
	return p, haveLSN && haveSeq && haveCmd && haveOp
}
