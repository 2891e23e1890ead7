package sendonce

import (
	"fmt"

	"github.com/sendonce/sendonce/driver"
	"github.com/sendonce/sendonce/vision"
)

// OCRLanguages are the languages a delivery's OCR reads: those given (a flag, or
// SENDONCE_OCR_LANGS), else the profile's ocr_languages, else English. A title or a
// name in a script outside them is read from the app's accessibility tree alone, and
// the result says so.
func OCRLanguages(given string, p *driver.Profile) (vision.Languages, error) {
	switch {
	case given != "":
		ls, err := vision.ParseLanguages(given)
		if err != nil {
			return nil, fieldError("ocr_lang", err)
		}
		return ls, nil
	case p != nil && p.OCRLanguages != "":
		ls, err := vision.ParseLanguages(p.OCRLanguages)
		if err != nil {
			return nil, fmt.Errorf("profile %s: ocr_languages: %w", p.App, err)
		}
		return ls, nil
	}
	return vision.DefaultLanguages, nil
}
