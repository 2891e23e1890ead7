package driver

import (
	"image"
	"testing"

	"github.com/sendonce/sendonce/vision"
)

func word(text string, x, y, line int) vision.Word {
	return vision.Word{Text: text, Box: image.Rect(x, y, x+8*len(text), y+14), Confidence: 90, Line: line}
}

func TestItemsReadsFileCards(t *testing.T) {
	r := &Runner{Vars: Vars{FileName: "report.txt"}}
	ws := []vision.Word{
		word("alice", 480, 207, 1), word("11:33", 520, 208, 1),
		word("report.txt", 565, 267, 2), word("17", 565, 282, 3), word("bytes", 585, 281, 3),
		word("alice", 480, 325, 4),
		word("ql.txt", 565, 385, 5), // another file
		word("rep0rt.txt", 565, 445, 6), word("26", 565, 460, 7), word("bytes", 585, 459, 7),
		word("report.txt", 900, 500, 8), word("4.2", 1200, 515, 9), word("kB", 1230, 515, 9), // a size far to the side is not its size
	}
	got := r.items(ws)
	want := []string{"report.txt|17 bytes", "rep0rt.txt|26 bytes", "report.txt|"}
	if len(got) != len(want) {
		t.Fatalf("items %+v; want %v", got, want)
	}
	for i, it := range got {
		if it.Name+"|"+it.Size != want[i] {
			t.Errorf("item %d = %s|%s; want %s", i, it.Name, it.Size, want[i])
		}
	}
}
