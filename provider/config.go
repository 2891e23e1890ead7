package provider

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// DecodeConfigFile reads a provider's account file at path into v: one JSON object whose
// fields are all known (a misspelt "pasword" would otherwise look like a missing
// password), and nothing after it. known lists the fields, for the error. An error
// never repeats the file's values (it may hold a password).
func DecodeConfigFile(path string, v any, known string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%s: not the expected JSON object: %s", path, jsonProblem(err, known))
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("%s: extra data after the JSON object", path)
	}
	return nil
}

// jsonProblem says what is wrong with a config file without quoting its values.
func jsonProblem(err error, known string) string {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return "syntax error at byte " + strconv.FormatInt(syn.Offset, 10)
	case errors.As(err, &typ):
		return fmt.Sprintf("field %q must be a %s", typ.Field, typ.Type)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "the file is empty or cut short"
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return err.Error()[len("json: "):] + " (known: " + known + ")"
	}
	return "invalid JSON"
}
