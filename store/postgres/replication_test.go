package postgres

import (
	"errors"
	"strings"
	"testing"

	"github.com/sendonce/sendonce/gate"
)

// TestReplicationRule: which set-ups a fleet store refuses at open, and why.
func TestReplicationRule(t *testing.T) {
	streaming := []Standby{{Name: "standby1", State: "streaming", SyncState: "async"}}
	for _, tc := range []struct {
		name string
		r    Replication
		mode string
		want error
	}{
		{"single server", Replication{}, "single", nil},
		{"single, a slot kept by an archiver", Replication{PhysicalSlots: 1}, "single", nil},
		{"synchronous", Replication{SynchronousStandbyNames: "standby1", Standbys: []Standby{{Name: "standby1", State: "streaming", SyncState: "sync"}}}, "synchronous", nil},
		{"synchronous, standby away (commits wait)", Replication{SynchronousStandbyNames: "standby1"}, "synchronous", nil},
		{"asynchronous", Replication{Standbys: streaming}, "asynchronous", ErrAsyncStandby},
		{"asynchronous, details hidden", Replication{Standbys: []Standby{{}}}, "asynchronous", ErrAsyncStandby},
		{"asynchronous, risk accepted", Replication{Standbys: streaming, AsyncAccepted: true}, "asynchronous", nil},
		{"a standby", Replication{InRecovery: true}, "standby", ErrStandby},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if m := tc.r.Mode(); m != tc.mode {
				t.Fatalf("Mode = %s; want %s", m, tc.mode)
			}
			err := tc.r.Check("db")
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("Check = %v; want %v", err, tc.want)
			}
			if err != nil && errors.Is(err, ErrAsyncStandby) && !strings.Contains(err.Error(), AcceptAsyncParam+"=accept_risk") {
				t.Fatalf("the refusal does not name the setting that accepts the risk: %v", err)
			}
			if tc.r.Describe() == "" {
				t.Fatal("no description")
			}
		})
	}
}

// TestAcceptsAsync: the setting is taken out of the URL the server sees; any other
// value is bad input.
func TestAcceptsAsync(t *testing.T) {
	ok, u, err := acceptsAsync("postgres://u@a:1,b:2/db?target_session_attrs=read-write&sendonce_async_standby=accept_risk")
	if err != nil || !ok || strings.Contains(u, "sendonce") || !strings.Contains(u, "target_session_attrs=read-write") {
		t.Fatalf("acceptsAsync = %v, %q, %v", ok, u, err)
	}
	if ok, u, err := acceptsAsync("postgres://u@a/db?sslmode=disable"); err != nil || ok || u != "postgres://u@a/db?sslmode=disable" {
		t.Fatalf("without the setting: %v, %q, %v", ok, u, err)
	}
	for _, bad := range []string{"yes", "", "accept_risk&sendonce_async_standby=accept_risk"} {
		if _, _, err := acceptsAsync("postgres://u@a/db?sendonce_async_standby=" + bad); !errors.Is(err, gate.ErrInvalid) {
			t.Fatalf("value %q: %v; want ErrInvalid", bad, err)
		}
	}
}
