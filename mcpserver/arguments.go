package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sendonce/sendonce"
)

// addTool adds a typed tool whose arguments this package reads itself, so that every
// wrong argument (an unknown field, a missing one, a wrong type) is a bad_input tool
// error naming the field, as the CLI and the HTTP service say it, not the SDK's own text.
// The input schema it publishes is the same one it checks.
func addTool[In, Out any](srv *mcp.Server, t *mcp.Tool, h mcp.ToolHandlerFor[In, Out]) {
	in, err := jsonschema.For[In](nil)
	if err != nil {
		panic(fmt.Sprintf("the input schema of %s: %v", t.Name, err))
	}
	t.InputSchema, t.OutputSchema = in, schemaFor[Out]()
	srv.AddTool(t, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var args In
		if err := decodeArguments(t.Name, req.Params.Arguments, in, &args); err != nil {
			return toolError(err), nil
		}
		res, out, err := h(ctx, req, args)
		if err != nil {
			return toolError(err), nil
		}
		if res == nil {
			res = &mcp.CallToolResult{}
		}
		if res.IsError || res.InputRequests != nil {
			return res, nil
		}
		b, err := json.Marshal(out)
		if err != nil {
			return nil, fmt.Errorf("encoding the %s result: %w", t.Name, err)
		}
		res.StructuredContent = json.RawMessage(b)
		res.Content = []mcp.Content{&mcp.TextContent{Text: string(b)}}
		return res, nil
	})
}

// decodeArguments reads a call's arguments strictly into v: one JSON object, every
// required field present, no field the tool does not take, each of its type.
func decodeArguments(tool string, raw json.RawMessage, s *jsonschema.Schema, v any) error {
	bad := func(field, format string, args ...any) error {
		return sendonce.FieldErrorf(field, format, args...)
	}
	if len(bytes.TrimSpace(raw)) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		raw = json.RawMessage("{}")
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return bad("arguments", "must be a JSON object: %v", err)
	}
	takes := slices.Sorted(func(yield func(string) bool) {
		for name := range s.Properties {
			if !yield(name) {
				return
			}
		}
	})
	for name := range fields {
		if s.Properties[name] == nil {
			return bad(name, "is not an argument of %s, which takes %s", tool, strings.Join(takes, ", "))
		}
	}
	for _, name := range s.Required {
		if _, ok := fields[name]; !ok {
			return bad(name, "is required (%s)", s.Properties[name].Description)
		}
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) {
			return bad(typeErr.Field, "must be a JSON %s, not %s", jsonKind(typeErr.Type.Kind()), typeErr.Value)
		}
		return bad("arguments", "%v", err)
	}
	if _, err := d.Token(); err != io.EOF {
		return bad("arguments", "hold something after the JSON object")
	}
	return nil
}

func jsonKind(k reflect.Kind) string {
	switch k {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Struct, reflect.Map:
		return "object"
	case reflect.Slice, reflect.Array:
		return "array"
	}
	return "number"
}
