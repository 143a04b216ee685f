package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/quarrylake/quarry/internal/natstest"
	"github.com/quarrylake/quarry/streams"
)

func dlqRun(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	e := &env{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, getenv: func(string) string { return "" }}
	code = runMain(context.Background(), e, append([]string{"dlq"}, args...))
	return code, out.String(), errb.String()
}

// TestDLQHelp: -h names the subcommands and exits 0, as every command's -h.
func TestDLQHelp(t *testing.T) {
	for _, h := range []string{"-h", "-help", "--help"} {
		code, _, errs := dlqRun(t, h)
		if code != 0 || !strings.Contains(errs, "usage: quarry dlq list|show|replay|drop") || !strings.Contains(errs, "  replay ") {
			t.Errorf("quarry dlq %s: exit %d, stderr %q; want exit 0 and the usage", h, code, errs)
		}
	}
	if code, _, errs := dlqRun(t, "list", "-h"); code != 0 || !strings.Contains(errs, "-stage") {
		t.Errorf("quarry dlq list -h: exit %d, stderr %q; want the flags", code, errs)
	}
}

func TestDLQBadArguments(t *testing.T) {
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{nil, "a subcommand is required"},
		{[]string{"purge"}, `unknown subcommand "purge"`},
		{[]string{"list", "--stage", "miner2"}, `--stage "miner2"`},
		{[]string{"list", "--limit", "0"}, "--limit 0"},
		{[]string{"list", "3"}, "list takes no sequences"},
		{[]string{"show"}, "show needs at least one dead-letter sequence"},
		{[]string{"replay", "x1"}, `"x1" is not a dead-letter sequence`},
		{[]string{"drop", "0"}, `"0" is not a dead-letter sequence`},
		{[]string{"list"}, "--nats is required"},
		{[]string{"list", "--bogus"}, "flag provided but not defined"},
	} {
		code, out, errs := dlqRun(t, tc.args...)
		if code != 2 || !strings.Contains(errs, tc.msg) || out != "" {
			t.Errorf("quarry dlq %v: exit %d, stdout %q, stderr %q; want exit 2 saying %q", tc.args, code, out, errs, tc.msg)
		}
	}
}

// TestDLQCommands dead-letters a report (committer) and a line
// (producer), then lists, shows, replays twice and drops them.
func TestDLQCommands(t *testing.T) {
	srv := natstest.RunServer(t)
	_, js := natstest.Connect(t, srv.URL(), streams.Config{})
	ctx := context.Background()
	if err := streams.DeadLetter(ctx, js, "committer", streams.ReportSubject("e1"), 5, []byte(`{"id":"e1.5"}`), "report names a missing file", nil); err != nil {
		t.Fatal(err)
	}
	hdr := map[string][]string{streams.HeaderSource: {"app.log"}, streams.HeaderOffset: {"42"}}
	if err := streams.DeadLetter(ctx, js, "producer", streams.LineSubject("acme"), 0, []byte("a very long line"), "line exceeds max_record_bytes", hdr); err != nil {
		t.Fatal(err)
	}
	url := srv.URL()

	code, out, errs := dlqRun(t, "list", "--nats", url)
	if code != 0 || !strings.Contains(out, "SEQ") || !strings.Contains(out, "report names a missing file") ||
		!strings.Contains(out, "acme") || !strings.Contains(out, "app.log") || !strings.Contains(out, "quarry.reports.e1") {
		t.Fatalf("list: exit %d\n%s%s", code, out, errs)
	}
	code, out, _ = dlqRun(t, "list", "--nats", url, "--stage", "producer", "--json")
	var got []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("list --json line %q: %v", l, err)
		}
		got = append(got, m)
	}
	if code != 0 || len(got) != 1 || got[0]["stage"] != "producer" || got[0]["tenant"] != "acme" || got[0]["source"] != "app.log" {
		t.Fatalf("list --stage producer --json: exit %d %v", code, got)
	}
	code, out, _ = dlqRun(t, "list", "--nats", url, "--limit", "1", "--json")
	if code != 0 || strings.Count(out, "\n") != 1 {
		t.Fatalf("list --limit 1: exit %d\n%s", code, out)
	}
	code, out, _ = dlqRun(t, "show", "--nats", url, "1")
	if code != 0 || !strings.Contains(out, `{\"id\":\"e1.5\"}`) || !strings.Contains(out, "original seq: 5") {
		t.Fatalf("show: exit %d\n%s", code, out)
	}
	code, out, errs = dlqRun(t, "replay", "--nats", url, "1")
	if code != 0 || !strings.Contains(out, "replayed to quarry.reports.e1") {
		t.Fatalf("replay: exit %d\n%s%s", code, out, errs)
	}
	code, out, _ = dlqRun(t, "replay", "--nats", url, "--json", "1")
	if code != 0 || !strings.Contains(out, `"already_done":true`) || !strings.Contains(out, `"published":false`) {
		t.Fatalf("second replay: exit %d\n%s", code, out)
	}
	s, err := js.Stream(ctx, streams.ReportStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil || info.State.Msgs != 1 {
		t.Fatalf("report stream after two replays: %d messages, %v; want 1", info.State.Msgs, err)
	}
	code, _, errs = dlqRun(t, "replay", "--nats", url, "2")
	if code != 1 || !strings.Contains(errs, "cannot be replayed") {
		t.Fatalf("replay of a producer dead letter: exit %d %s", code, errs)
	}
	code, out, _ = dlqRun(t, "drop", "--nats", url, "2")
	if code != 0 || !strings.Contains(out, "dead letter 2: dropped") {
		t.Fatalf("drop: exit %d %s", code, out)
	}
	code, _, errs = dlqRun(t, "show", "--nats", url, "2")
	if code != 1 || !strings.Contains(errs, "no such dead letter") {
		t.Fatalf("show after drop: exit %d %s", code, errs)
	}
}
