package service

import (
	_ "embed"
	"encoding/json"
	"fmt"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/sendonce/sendonce"
	"github.com/sendonce/sendonce/internal/schema"
)

// The OpenAPI 3.1 description at /v1/openapi.json: the paths are written by hand
// (openapi.json), the schemas are made from the Go types the service reads and writes,
// so the description cannot drift from what the service answers. Every response of the
// HTTP tests is validated against it.

//go:embed openapi.json
var openapiPaths []byte

type openapiDoc struct {
	OpenAPI    string          `json:"openapi"`
	Info       json.RawMessage `json:"info"`
	Servers    json.RawMessage `json:"servers"`
	Security   json.RawMessage `json:"security"`
	Paths      json.RawMessage `json:"paths"`
	Components components      `json:"components"`
}

type components struct {
	Schemas         map[string]*jsonschema.Schema `json:"schemas"`
	Responses       json.RawMessage               `json:"responses"`
	Parameters      map[string]parameter          `json:"parameters"`
	SecuritySchemes json.RawMessage               `json:"securitySchemes"`
}

type parameter struct {
	Name        string             `json:"name"`
	In          string             `json:"in"`
	Required    bool               `json:"required"`
	Schema      *jsonschema.Schema `json:"schema"`
	Description string             `json:"description,omitempty"`
}

// OpenAPI returns the service's OpenAPI 3.1 description.
func OpenAPI() ([]byte, error) {
	var doc openapiDoc
	if err := json.Unmarshal(openapiPaths, &doc); err != nil {
		return nil, fmt.Errorf("openapi.json: %v", err)
	}
	doc.Components.Schemas = map[string]*jsonschema.Schema{
		"ClaimBody":        schema.For[ClaimBody](),
		"BoundaryBody":     schema.For[BoundaryBody](),
		"RenewBody":        schema.For[RenewBody](),
		"RecordBody":       schema.For[RecordBody](),
		"ReconcileBody":    schema.For[ReconcileBody](),
		"DeliverBody":      schema.For[DeliverBody](),
		"ClaimResult":      schema.For[sendonce.ClaimResult](),
		"Decision":         schema.For[sendonce.Decision](),
		"StatusResult":     schema.For[sendonce.StatusResult](),
		"ReconcileResult":  schema.For[sendonce.ReconcileResult](),
		"DeliveryResult":   schema.For[sendonce.DeliveryResult](),
		"DeliveryAccepted": schema.For[DeliveryAccepted](),
		"Health":           schema.For[Health](),
		"Problem":          schema.For[Problem](),
	}
	// Content is base64 in JSON.
	for _, name := range []string{"ClaimBody", "DeliverBody"} {
		doc.Components.Schemas[name].Properties["content"] = &jsonschema.Schema{Type: "string", ContentEncoding: "base64",
			Description: doc.Components.Schemas[name].Properties["content"].Description}
	}
	// The Idempotency-Key's rule is the server's own.
	doc.Components.Parameters["IdempotencyKey"].Schema.Pattern = IdempotencyKeyPattern
	// A problem's exit code is null where the CLI has none.
	doc.Components.Schemas["Problem"].Properties["exit_code"] = &jsonschema.Schema{Types: []string{"integer", "null"}}
	return json.MarshalIndent(doc, "", "  ")
}
