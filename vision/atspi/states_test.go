package atspi

import (
	"strings"
	"testing"
)

func TestStateNames(t *testing.T) {
	// GTK's enabled, sensitive, showing button: bits 8, 24, 25, 30; word 1 bit 3 is
	// truncated (35 - 32), and a state past the known ones keeps its number.
	got := stateNames([]uint32{1<<8 | 1<<24 | 1<<25 | 1<<30, 1<<2 | 1<<31})
	want := "enabled,sensitive,showing,state-63,truncated,visible"
	if strings.Join(got, ",") != want {
		t.Fatalf("states %v; want %s", got, want)
	}
}

func TestStateBitsRoundTrip(t *testing.T) {
	names := []string{"visible", "focused", "read-only", "sensitive", "truncated"}
	got := stateNames(StateBits(names))
	if strings.Join(got, ",") != "focused,read-only,sensitive,truncated,visible" {
		t.Fatalf("StateBits then stateNames: %v", got)
	}
}
