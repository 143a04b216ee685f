package httpin

import (
	"bytes"
	"net/http"
	"testing"

	"github.com/quarrylake/quarry/producer"
)

// FuzzBulk: any body parses without panic into items that account for
// every good document (status 201 exactly when its entry is good), with
// an action per item and entries mapped to increasing items.
func FuzzBulk(f *testing.F) {
	f.Add([]byte("{\"index\":{}}\n{\"message\":\"a\"}\n{\"create\":{\"_id\":\"x\"}}\n{\"log\":\"b\"}\n"))
	f.Add([]byte("{\"delete\":{}}\n{\"update\":{}}\n{\"doc\":{}}\nnot json\n{\"index\":{}}\n"))
	f.Add([]byte("{\"index\":{}}"))
	f.Fuzz(func(t *testing.T, body []byte) {
		entry := func(doc string) producer.Entry {
			e, err := Entry([]byte(doc), []string{"message"})
			if err != nil {
				return producer.Entry{Text: doc, Bad: err.Error()}
			}
			return e
		}
		entries, items, entryItem := parseBulk(string(body), "t", entry)
		if len(entries) != len(entryItem) {
			t.Fatalf("%d entries, %d mapped", len(entries), len(entryItem))
		}
		if len(bytes.TrimSpace(body)) > 0 && len(items) == 0 {
			t.Fatal("a non-empty body gave no item")
		}
		prev := -1
		for i, it := range entryItem {
			if it <= prev || it >= len(items) {
				t.Fatalf("entry %d maps to item %d (previous %d, %d items)", i, it, prev, len(items))
			}
			prev = it
			if res := items[it].res; (res.Status == http.StatusCreated) != (entries[i].Bad == "") {
				t.Fatalf("item %d status %d, entry bad %q", it, res.Status, entries[i].Bad)
			}
		}
		for _, it := range items {
			if it.op == "" {
				t.Fatal("item without its action")
			}
		}
	})
}
