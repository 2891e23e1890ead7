// Package mcpserver serves sendonce to AI agents over the Model Context Protocol: each
// tool is a thin call into the sendonce library, and every outcome (and every refusal
// because a delivery is consumed or held) is a successful tool result an agent cannot
// misread; tool errors are only for bad input and for fail-closed.
//
// Work in progress (issue 11): the read-only tools. deliver, the gate tools, roots,
// attaching a repeated call to a running delivery, progress and the HTTP transport are
// still to come.
package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sendonce/sendonce"
)

// Server is the MCP server over one sendonce Client.
type Server struct {
	Client  *sendonce.Client
	Version string
}

// StatusInput names a delivery by key, or by destination and file.
type StatusInput struct {
	Key    string `json:"key,omitempty" jsonschema:"a delivery key as deliver and status print it"`
	To     string `json:"to,omitempty" jsonschema:"the conversation's exact visible title"`
	DestID string `json:"dest_id,omitempty" jsonschema:"the provider id of the destination, e.g. xmpp:bob@example.org"`
	File   string `json:"file,omitempty" jsonschema:"absolute path of the file whose delivery to look up"`
}

// VerifyInput names a bundle.
type VerifyInput struct {
	Bundle string `json:"bundle" jsonschema:"the evidence bundle folder or archive, as deliver printed it"`
}

// New builds the MCP server with its tools.
func (s *Server) New() *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "sendonce", Version: s.Version}, nil)
	readOnly := &mcp.ToolAnnotations{ReadOnlyHint: true}
	mcp.AddTool(srv, &mcp.Tool{Name: "status", Annotations: readOnly, OutputSchema: schemaFor[sendonce.StatusResult](),
		Description: "Where a delivery stands: free, held, consumed (sent_verified, send_status_unknown, sent_rejected) or not_sent. Reading it never sends anything."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in StatusInput) (*mcp.CallToolResult, sendonce.StatusResult, error) {
			res, err := s.Client.Status(ctx, statusRequest(in))
			return toolResult(res, err)
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "show", Annotations: readOnly, OutputSchema: schemaFor[sendonce.StatusResult](),
		Description: "A delivery's status with every decision the gate made about it, in order."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in StatusInput) (*mcp.CallToolResult, sendonce.StatusResult, error) {
			res, err := s.Client.Show(ctx, statusRequest(in))
			return toolResult(res, err)
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "verify_evidence", Annotations: readOnly, OutputSchema: schemaFor[sendonce.VerifyResult](),
		Description: "Verify an evidence bundle and authenticate it with the store: authenticated false means nothing outside the bundle vouches for it."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in VerifyInput) (*mcp.CallToolResult, sendonce.VerifyResult, error) {
			res, err := s.Client.VerifyEvidence(ctx, sendonce.VerifyRequest{Path: in.Bundle, AllowUnauthenticated: true})
			return toolResult(res, err)
		})
	return srv
}

// schemaFor is the output schema of a library result: its times are RFC 3339 strings.
func schemaFor[T any]() *jsonschema.Schema {
	s, err := jsonschema.For[T](&jsonschema.ForOptions{TypeSchemas: map[reflect.Type]*jsonschema.Schema{
		reflect.TypeFor[sendonce.Time](): {Type: "string", Format: "date-time"},
	}})
	if err != nil {
		panic(fmt.Sprintf("output schema of %T: %v", *new(T), err))
	}
	return s
}

func statusRequest(in StatusInput) sendonce.StatusRequest {
	return sendonce.StatusRequest{Key: in.Key, Destination: sendonce.Destination{Title: in.To, ProviderID: in.DestID}, Content: sendonce.Content{Path: in.File}}
}

// toolResult turns a library error into a tool error an agent and a person can act on;
// a result without error is the structured content.
func toolResult[R any](res R, err error) (*mcp.CallToolResult, R, error) {
	if err == nil {
		return nil, res, nil
	}
	var zero R
	r := &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("%s: %v", kind(err), err)}}}
	return r, zero, nil
}

// kind is the error's kind, as the CLI's exit codes name them.
func kind(err error) string {
	switch {
	case errors.Is(err, sendonce.ErrInvalid):
		return "bad_input"
	case errors.Is(err, sendonce.ErrUnavailable), errors.Is(err, sendonce.ErrNotInitialized):
		return "fail_closed"
	case errors.Is(err, sendonce.ErrEvidence):
		return "evidence_untrusted"
	}
	return "error"
}
