//go:build cgo

package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/sendonce/sendonce"
	"github.com/sendonce/sendonce/driver"
	"github.com/sendonce/sendonce/vision/tesseract"
)

// cmdDoctor checks what a delivery needs and says what to fix; exit 0 only when a
// delivery could start.
func cmdDoctor(ctx context.Context, env *environment, args []string) error {
	fs := env.flags("doctor", "[--app NAME | --profile FILE] [--display :N] [--staging DIR] [--dest-id NS:ID] [--provider-config FILE]")
	var req sendonce.DoctorRequest
	var profile string
	fs.StringVar(&req.App, "app", "", "the profile by `NAME`, as deliver takes it")
	fs.StringVar(&profile, "profile", "", "a profile `FILE`, as deliver takes it")
	fs.StringVar(&req.Display, "display", "", "the X display (default $DISPLAY)")
	fs.StringVar(&req.Staging, "staging", "", "the staging folder deliver would use (default as deliver's)")
	fs.StringVar(&req.Destination, "dest-id", "", "the destination's provider id `NS:ID`, as deliver takes it: its provider's account is checked (a Matrix one must read its room)")
	fs.StringVar(&req.ProviderConfig, "provider-config", "", "the provider account `FILE` to log in with (or SENDONCE_XMPP_* / SENDONCE_MATRIX_*)")
	fs.StringVar(&req.OCRLanguages, "ocr-lang", "", "the OCR `LANGUAGES` deliver would read in (default $SENDONCE_OCR_LANGS, else the profile's, else eng)")
	if _, err := env.parse(fs, args, 0); err != nil {
		return err
	}
	switch {
	case req.App != "" && profile != "":
		return usagef("doctor: give --app NAME or --profile FILE, not both")
	case profile != "":
		p, err := driver.LoadProfileFile(profile)
		if err != nil {
			return usagef("doctor: --profile: %v", err)
		}
		req.Profile = p
	case req.App == "":
		return usagef("doctor: --app NAME or --profile FILE is required ('sendonce profile list' shows the profiles)")
	}
	var err error
	if req.Display, req.Staging, err = env.displayAndStaging("doctor", req.Display, req.Staging); err != nil {
		return err
	}
	if req.Store, err = env.storeLocation(); err != nil {
		return err
	}
	if req.OCRLanguages == "" {
		req.OCRLanguages = env.getenv("SENDONCE_OCR_LANGS")
	}
	open := func(ctx context.Context, display string) (driver.Driver, func(), error) {
		if display == "" { // every other check still runs
			return nil, nil, errors.New("no display: DISPLAY is not set and no --display was given")
		}
		return openLive(ctx, display)
	}
	desk := sendonce.Desktop{OpenDesktop: open, LanguageData: tesseract.LanguageAvailable}
	ocr, err := tesseract.New(nil)
	if err != nil {
		desk.OCRError = err
	} else {
		defer ocr.Close()
		desk.OCR = ocr
	}
	res := sendonce.Doctor(ctx, req, env.options(), desk)
	env.print(res)
	if !res.Ready {
		return exitError{1, fmt.Errorf("a delivery could not start: see the checks that failed")}
	}
	return nil
}
