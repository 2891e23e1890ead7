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

	"github.com/sendonce/sendonce/internal/files"
)

// ErrUnsafeFile is an account file another user could read or change: refused.
var ErrUnsafeFile = errors.New("account file refused")

// maxConfigBytes bounds an account file: a few fields.
const maxConfigBytes = 1 << 20

// DecodeConfigFile reads a provider's account file at path into v: one JSON object whose
// fields are all known (a misspelt "pasword" would otherwise look like a missing
// password), and nothing after it. known lists the fields, for the error. An error
// never repeats the file's values (it may hold a password).
//
// The file holds a password or an access token, so it is checked as the store and the
// workstation key are, on the descriptor it is read from: a regular file (not a link)
// of this user's that no one else may read or write (internal/files.ReadSecret). A
// refusal matches ErrUnsafeFile and says the command that fixes it (chmod 600 FILE).
func DecodeConfigFile(path string, v any, known string) error {
	b, err := files.ReadSecret(path, "", os.Getuid(), maxConfigBytes)
	if errors.Is(err, files.ErrUnsafe) {
		return fmt.Errorf("%w: %s", ErrUnsafeFile, strings.TrimPrefix(err.Error(), files.ErrUnsafe.Error()+": "))
	}
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
