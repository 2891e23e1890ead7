package sendonce

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/sendonce/sendonce/driver"
)

// TestDoctorsDesktopNeverActs: every method of driver.Driver but the four that only
// look is refused by doctor's desktop, before it reaches the desktop it wraps (here
// none, which a method passed through would panic on). A method added to the interface
// later fails this test until noInput refuses it or it is named as one that only looks.
func TestDoctorsDesktopNeverActs(t *testing.T) {
	looks := map[string]bool{"Windows": true, "Capture": true, "Bounds": true, "Focused": true}
	iface := reflect.TypeFor[driver.Driver]()
	d := reflect.ValueOf(noInput{})
	for i := range iface.NumMethod() {
		name := iface.Method(i).Name
		if looks[name] {
			continue
		}
		t.Run(name, func(t *testing.T) {
			m := d.MethodByName(name)
			args := []reflect.Value{reflect.ValueOf(context.Background())}
			for j := 1; j < m.Type().NumIn(); j++ {
				args = append(args, reflect.Zero(m.Type().In(j)))
			}
			defer func() {
				if recover() != nil {
					t.Fatalf("noInput passes %s through to the desktop: doctor would act", name)
				}
			}()
			out := m.Call(args)
			err, _ := out[len(out)-1].Interface().(error)
			if !errors.Is(err, errNoInput) {
				t.Fatalf("noInput.%s returned %v; want errNoInput", name, err)
			}
		})
	}
}
