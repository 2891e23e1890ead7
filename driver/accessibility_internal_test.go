package driver

import (
	"testing"
	"time"

	"github.com/sendonce/sendonce/vision/atspi"
)

// TestSnapshotLimits: a read of an app's tree is bounded by the time its scope gives (a
// wait's reads get longer), else by snapshotTime; the scope's other fields pass through.
func TestSnapshotLimits(t *testing.T) {
	dialog := &atspi.Match{Role: "dialog"}
	for _, c := range []struct {
		scope TreeScope
		want  time.Duration
	}{
		{TreeScope{}, snapshotTime},
		{TreeScope{Time: 30 * time.Second, Windows: dialog}, 30 * time.Second},
		{TreeScope{Time: time.Second, ThroughViewports: true}, time.Second},
	} {
		l := snapshotLimits(c.scope)
		if l.Time != c.want || !l.ShowingOnly || l.Windows != c.scope.Windows || l.ThroughViewports != c.scope.ThroughViewports {
			t.Errorf("scope %+v: limits %+v; want Time %v, showing only, the scope's windows and viewports", c.scope, l, c.want)
		}
	}
}
