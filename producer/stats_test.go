package producer

import (
	"reflect"
	"testing"
)

// Add sums every counter of Stats and keeps the highest LastSeq; only
// Source and Position (not counts) stay the receiver's. A counter added to
// Stats and not to Add fails here.
func TestStatsAdd(t *testing.T) {
	var o Stats
	ov := reflect.ValueOf(&o).Elem()
	for i := range ov.NumField() {
		if f := ov.Field(i); f.Kind() == reflect.Uint64 {
			f.SetUint(uint64(10 + i))
		}
	}
	o.Source = "other"
	s := Stats{Source: "mine", Position: 7, LastSeq: 1000}
	s.Add(o)
	s.Add(o)
	sv := reflect.ValueOf(s)
	for i := range sv.NumField() {
		name := sv.Type().Field(i).Name
		if sv.Field(i).Kind() != reflect.Uint64 {
			continue
		}
		got, each := sv.Field(i).Uint(), ov.Field(i).Uint()
		var want uint64
		switch name {
		case "Position":
			want = 7
		case "LastSeq":
			want = 1000
		default:
			want = 2 * each
		}
		if got != want {
			t.Errorf("%s = %d after adding %d twice, want %d", name, got, each, want)
		}
	}
	if s.Source != "mine" {
		t.Errorf("Source %q, want mine", s.Source)
	}
	s = Stats{LastSeq: 3}
	s.Add(Stats{LastSeq: 9})
	if s.LastSeq != 9 {
		t.Errorf("LastSeq %d, want the highest, 9", s.LastSeq)
	}
}
