package driver

import (
	"os"
	"reflect"
	"strings"
	"testing"
)

func TestParseStatus(t *testing.T) {
	for _, tc := range []struct {
		name, status string
		want         Credentials
		err          string
	}{
		{name: "filesystem ids are the fourth field",
			status: "Name:\tgajim\nUid:\t1001\t1002\t1003\t1004\nGid:\t2001\t2002\t2003\t2004\nGroups:\t27 100 \n",
			want:   Credentials{UID: 1004, Groups: []int{2004, 27, 100}}},
		{name: "no supplementary groups",
			status: "Uid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\nGroups:\t\n",
			want:   Credentials{UID: 0, Groups: []int{0}}},
		{name: "no Uid line", status: "Gid:\t1\t1\t1\t1\n", err: "no Uid or Gid"},
		{name: "a short Uid line", status: "Uid:\t1\t1\nGid:\t1\t1\t1\t1\n", err: "no Uid or Gid"},
		{name: "a group that is no number", status: "Uid:\t1\t1\t1\t1\nGid:\t1\t1\t1\t1\nGroups:\t1 x\n", err: `group "x"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseStatus(tc.status)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("parseStatus = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func TestProcessCredentialsOfThisProcess(t *testing.T) {
	c, err := ProcessCredentials(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if c.UID != os.Geteuid() || len(c.Groups) == 0 || c.Groups[0] != os.Getegid() {
		t.Fatalf("credentials %+v; this process runs as uid %d gid %d", c, os.Geteuid(), os.Getegid())
	}
}
