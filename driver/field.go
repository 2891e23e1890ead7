package driver

import (
	"context"
	"errors"
	"fmt"

	"github.com/sendonce/sendonce/evidence"
)

// fieldReadInputs are the keys Driver.FieldText presses: ctrl+a to select the text, End
// to leave the field as it was.
func fieldReadInputs() []evidence.Input {
	return []evidence.Input{evidence.KeyInput("ctrl+a"), evidence.KeyInput("End")}
}

// ErrFieldText: a field read back through the X selection did not hold the text the
// step wants (or could not be read).
var ErrFieldText = errors.New("field text")

// readField selects all of the focused field's text in the step's dialog and reads it
// back through the X selection: the app's own characters, so a key it lost anywhere in
// a typed path stops the delivery here, before the step that would choose the file.
func (r *Runner) readField(ctx context.Context, s Step, res *evidence.Record) error {
	w, ok, err := r.windowTitled(ctx, s.Window)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: no window titled %q to read the field of", ErrFieldText, s.Window)
	}
	within, cancel := context.WithTimeout(ctx, r.timeout(s))
	defer cancel()
	got, err := r.Driver.FieldText(within, w)
	if got != "" || err == nil { // a text read and then refused is evidence too
		res.Target = &evidence.Target{Method: "x_selection", Words: []string{got}, Window: w.Title}
	}
	if err != nil {
		return fmt.Errorf("%w: %w", ErrFieldText, err)
	}
	res.Inputs = fieldReadInputs()
	if want := r.Vars.expand(s.Text); got != want {
		return fmt.Errorf("%w: the field in %q holds %q, not %q: stopped before anything else is pressed", ErrFieldText, w.Title, got, want)
	}
	return nil
}
