package sendonce

import (
	"fmt"

	"github.com/sendonce/sendonce/driver"
)

// ProfileCheckResult is a valid profile file, summarized: how it crosses the gate's
// boundaries and what it relies on to prove a delivery.
type ProfileCheckResult struct {
	driver.ProfileSummary
}

// CheckProfile validates a profile file exactly as a built-in is validated; the error
// names the phase, the step and the field that are wrong.
func CheckProfile(path string) (ProfileCheckResult, error) {
	p, err := driver.LoadProfileFile(path)
	if err != nil {
		return ProfileCheckResult{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return ProfileCheckResult{p.Summary()}, nil
}

// ProfileListResult is every profile the folders and the built-ins hold.
type ProfileListResult struct {
	Folders  []string              `json:"folders"`
	Profiles []driver.ProfileEntry `json:"profiles"`
}

// ListProfiles lists the profiles in dirs (NAME.json, in order) and the built-ins, and
// which one a name resolves to.
func ListProfiles(dirs []string) ProfileListResult {
	if dirs == nil {
		dirs = []string{}
	}
	return ProfileListResult{Folders: dirs, Profiles: driver.Profiles{Dirs: dirs}.List()}
}
