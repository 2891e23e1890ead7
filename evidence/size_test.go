package evidence

import "testing"

func TestNameMatches(t *testing.T) {
	for _, tc := range []struct {
		read, want string
		ok         bool
	}{
		{"report.txt", "report.txt", true},
		{"rep0rt.txt", "report.txt", true},
		{"ql.txt", "q1.txt", true},
		{"fhi rst.txt", "first.txt", true},
		{"hirst.txt", "first.txt", true},
		{"\ufb01rst.txt", "first.txt", true},
		{"report.t…", "report.txt", false},
		{"report.txt", "report.csv", false},
		{"", "report.txt", false},
		{"minutes.txt", "report.txt", false},
	} {
		if got := NameMatches(tc.read, tc.want); got != tc.ok {
			t.Errorf("NameMatches(%q, %q) = %v; want %v", tc.read, tc.want, got, tc.ok)
		}
	}
}

func TestSizeMatches(t *testing.T) {
	for _, tc := range []struct {
		shown string
		n     int64
		ok    bool
	}{
		{"17 bytes", 17, true}, {"17 B", 17, true}, {"17 bytes", 18, false},
		{"6.0 kB", 6034, true}, {"6.0 kB", 6200, false}, {"1.2 MB", 1_200_000, true},
		{"1.2 MiB", 1_258_291, true}, {"", 99, true}, {"lots", 5, false}, {"5 MB", 17, false},
	} {
		if got := SizeMatches(tc.shown, tc.n); got != tc.ok {
			t.Errorf("SizeMatches(%q, %d) = %v; want %v", tc.shown, tc.n, got, tc.ok)
		}
	}
}

func FuzzParseDisplayedSize(f *testing.F) {
	for _, s := range []string{"17 bytes", "1.2 kB", "3,4 MiB", "x", "9999999999999999999999 GB"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, tol, ok := ParseDisplayedSize(s)
		if ok && (v < 0 || tol < 0) {
			t.Fatalf("%q: %v ± %v", s, v, tol)
		}
	})
}

func TestPathMatches(t *testing.T) {
	for _, tc := range []struct {
		read, typed string
		want        bool
	}{
		{"/tmp/a/0f8c/x.txt", "/tmp/a/0f8c/x.txt", true},
		{"/tmp/a/Ofsc/x.txt", "/tmp/a/0f8c/x.txt", true}, // O for 0, s for 8
		{"/tmp/a/0f8e/x.txt", "/tmp/a/0f8c/x.txt", true}, // e for c
		{"/tmp/a/0f8/x.txt", "/tmp/a/0f8c/x.txt", false}, // one lost
		{"/tmp/a/0f8cc/x.txt", "/tmp/a/0f8c/x.txt", false},
		{"/tmp/a/f08c/x.txt", "/tmp/a/0f8c/x.txt", false}, // two swapped
		{"/tmp/a/0f8c/x.txt", "/tmp/a/0f8c/y.txt", false},
		{"/tmp/a/m/x.txt", "/tmp/a/rn/x.txt", false}, // two read as one: NameMatches folds it, a path may not
	} {
		if got := PathMatches(tc.read, tc.typed); got != tc.want {
			t.Errorf("PathMatches(%q, %q) = %v, want %v", tc.read, tc.typed, got, tc.want)
		}
	}
}
