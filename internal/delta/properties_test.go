package delta

import (
	"context"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/quarrylake/quarry/internal/objstore"
)

func TestParseInterval(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		bad  bool
	}{
		{in: "interval 30 days", want: 30 * 24 * time.Hour},
		{in: "interval 1 week", want: 7 * 24 * time.Hour},
		{in: "INTERVAL 2 Weeks", want: 14 * 24 * time.Hour},
		{in: "interval 1 day 12 hours", want: 36 * time.Hour},
		{in: "  interval   90   minutes ", want: 90 * time.Minute},
		{in: "12 hours", want: 12 * time.Hour},
		{in: "interval 1 second", want: time.Second},
		{in: "interval 250 milliseconds", want: 250 * time.Millisecond},
		{in: "interval 1 month", bad: true}, // no fixed length
		{in: "interval 1 year", bad: true},
		{in: "interval", bad: true},
		{in: "interval 3", bad: true},
		{in: "interval x days", bad: true},
		{in: "interval 1.5 days", bad: true},
		{in: "interval 9999999999999 weeks", bad: true},
		// Pairs each in range whose sum is not: it wrapped to a day.
		{in: "interval" + strings.Repeat(" 4611686018427387903 nanoseconds", 4) + " 1 day", bad: true},
		{in: "interval 4611686018427387903 nanoseconds -4611686018427387903 nanoseconds 1 hour", want: time.Hour},
		{in: "", bad: true},
	} {
		got, err := ParseInterval(tc.in)
		if (err != nil) != tc.bad || !tc.bad && got != tc.want {
			t.Errorf("ParseInterval(%q) = %s, %v; want %s (error %v)", tc.in, got, err, tc.want, tc.bad)
		}
	}
}

func TestFormatIntervalRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{30 * 24 * time.Hour, "interval 30 days"},
		{7 * 24 * time.Hour, "interval 7 days"},
		{36 * time.Hour, "interval 36 hours"},
		{90 * time.Minute, "interval 90 minutes"},
		{1500 * time.Millisecond, "interval 1500 milliseconds"},
		{time.Nanosecond, "interval 1 nanoseconds"},
	} {
		s := FormatInterval(tc.d)
		if s != tc.want {
			t.Errorf("FormatInterval(%s) = %q, want %q", tc.d, s, tc.want)
		}
		if back, err := ParseInterval(s); err != nil || back != tc.d {
			t.Errorf("ParseInterval(%q) = %s, %v; want %s", s, back, err, tc.d)
		}
	}
}

func TestReadProperties(t *testing.T) {
	p, err := ReadProperties(map[string]string{
		PropCheckpointInterval: "25", PropLogRetention: "interval 2 days", PropDeletedFileRetention: "interval 1 week",
		"delta.appendOnly": "true",
	})
	if err != nil || p != (Properties{CheckpointInterval: 25, LogRetention: 48 * time.Hour, DeletedFileRetention: 7 * 24 * time.Hour}) {
		t.Fatalf("ReadProperties = %+v, %v", p, err)
	}
	// Unreadable values are left zero and every one is reported.
	p, err = ReadProperties(map[string]string{PropCheckpointInterval: "0", PropLogRetention: "interval 1 month", PropDeletedFileRetention: "interval -1 days"})
	if p != (Properties{}) || err == nil {
		t.Fatalf("ReadProperties of bad values = %+v, %v", p, err)
	}
	for _, k := range []string{PropCheckpointInterval, PropLogRetention, PropDeletedFileRetention} {
		if !strings.Contains(err.Error(), k) {
			t.Errorf("error %q does not name %s", err, k)
		}
	}
	if p, err := ReadProperties(nil); err != nil || p != (Properties{}) {
		t.Errorf("ReadProperties(nil) = %+v, %v", p, err)
	}
	// Set writes what ReadProperties reads back.
	want := Properties{CheckpointInterval: 100, LogRetention: 720 * time.Hour, DeletedFileRetention: 168 * time.Hour}
	conf := map[string]string{}
	want.Set(conf)
	if conf[PropLogRetention] != "interval 30 days" || conf[PropCheckpointInterval] != "100" {
		t.Errorf("Set wrote %v", conf)
	}
	if got, err := ReadProperties(conf); err != nil || got != want {
		t.Errorf("round trip: %+v, %v; want %+v", got, err, want)
	}
}

// TestTableProperties: a table's Properties come from the metadata its
// cached state last read, including a metaData update after creation.
func TestTableProperties(t *testing.T) {
	ctx := context.Background()
	store, err := objstore.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	tbl := OpenTable(store, "t")
	if p, err := tbl.Properties(); err != nil || p != (Properties{}) {
		t.Fatalf("before any snapshot: %+v, %v", p, err)
	}
	md := Metadata{SchemaString: `{"type":"struct","fields":[]}`, PartitionColumns: []string{},
		Configuration: map[string]string{PropCheckpointInterval: "7"}}
	if err := tbl.Create(ctx, md); err != nil {
		t.Fatal(err)
	}
	snap, err := tbl.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if p, err := tbl.Properties(); err != nil || p.CheckpointInterval != 7 {
		t.Fatalf("after create: %+v, %v", p, err)
	}
	md = snap.Metadata
	md.Configuration = map[string]string{PropCheckpointInterval: "9", PropLogRetention: "interval 3 hours"}
	if err := tbl.Commit(ctx, 1, []Action{{MetaData: &md}}); err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	if p, err := tbl.Properties(); err != nil || p != (Properties{CheckpointInterval: 9, LogRetention: 3 * time.Hour}) {
		t.Fatalf("after the metaData update: %+v, %v", p, err)
	}
}

// A parsed interval is the exact sum of its pairs, or an error: never a
// sum that wrapped around.
func FuzzParseInterval(f *testing.F) {
	f.Add("interval 30 days")
	f.Add("interval 1 day 12 hours")
	f.Add("interval" + strings.Repeat(" 4611686018427387903 nanoseconds", 5))
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseInterval(s)
		if err != nil {
			return
		}
		f := strings.Fields(strings.ToLower(s))
		if f[0] == "interval" {
			f = f[1:]
		}
		sum := new(big.Int)
		for i := 0; i < len(f); i += 2 {
			n, _ := new(big.Int).SetString(f[i], 10)
			unit := intervalUnits[strings.TrimSuffix(f[i+1], "s")]
			sum.Add(sum, n.Mul(n, big.NewInt(int64(unit))))
		}
		if sum.Cmp(big.NewInt(int64(d))) != 0 {
			t.Fatalf("ParseInterval(%q) = %d, its pairs sum to %s", s, d, sum)
		}
	})
}
