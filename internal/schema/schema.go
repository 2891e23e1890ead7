// Package schema makes the JSON schemas of sendonce's result types, as the MCP tools
// and the HTTP service's OpenAPI description publish them.
package schema

import (
	"fmt"
	"reflect"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/sendonce/sendonce"
)

// For is the JSON schema of T: its times are RFC 3339 strings, and no field is
// required (a result's conditional fields are absent when they do not apply; the types
// stay).
func For[T any]() *jsonschema.Schema {
	s, err := jsonschema.For[T](&jsonschema.ForOptions{TypeSchemas: map[reflect.Type]*jsonschema.Schema{
		reflect.TypeFor[sendonce.Time](): {Type: "string"},
	}})
	if err != nil {
		panic(fmt.Sprintf("schema of %T: %v", *new(T), err))
	}
	optional(s)
	return s
}

func optional(s *jsonschema.Schema) {
	if s == nil {
		return
	}
	s.Required = nil
	for _, p := range s.Properties {
		optional(p)
	}
	optional(s.Items)
	for _, d := range s.Defs {
		optional(d)
	}
	optional(s.AdditionalProperties)
}
