package serve

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/escurel/escurel/blobstore"
	"github.com/escurel/escurel/index"
)

// URIs of the MCP resources.
const (
	documentURIPrefix = "escurel://documents/"
	blockURIPrefix    = "escurel://blocks/"
)

// ResourcesPage is how many documents one resources/list answer lists;
// nextCursor leads to the next page.
const ResourcesPage = 100

// DocumentURI is the MCP resource URI of a document: its text.
func DocumentURI(docID string) string { return documentURIPrefix + docID }

// BlockURI is the MCP resource URI of a block: its body and citation
// fields as JSON. id is a block id as hits carry it (index.Hit.BlockID).
func BlockURI(id string) string { return blockURIPrefix + id }

// parseBlockID is the one place a block id meets a URI: block ids are
// opaque to a client.
func parseBlockID(s string) (string, error) {
	if err := index.CheckBlockID(s); err != nil {
		return "", errors.New("not a block id")
	}
	return s, nil
}

// addResources adds the documents and blocks at clearance as resources:
// templates escurel://documents/{doc_id} (the text, text/plain, with
// source and title in _meta) and escurel://blocks/{block_id} (the block as
// JSON, with what a citation needs), and a resources/list of the
// documents clearance may see, a page at a time. A resource above the
// clearance answers as a missing one.
func (s *Server) addResources(srv *mcp.Server, clearance string) {
	srv.AddResourceTemplate(&mcp.ResourceTemplate{
		Name:        "document",
		Title:       "A document's text",
		Description: "The extracted text of a document; every block's body is text[byte_start:byte_end]. _meta has its source and title.",
		URITemplate: documentURIPrefix + "{doc_id}",
		MIMEType:    "text/plain",
	}, func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		uri := req.Params.URI
		id, ok := strings.CutPrefix(uri, documentURIPrefix)
		if !ok || !blobstore.IsDocID(id) {
			return nil, mcp.ResourceNotFoundError(uri)
		}
		out, err := s.sv.document(ctx, clearance, &DocumentInput{DocID: id})
		if err != nil {
			return nil, s.resourceError(ctx, uri, err)
		}
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{
			URI: uri, MIMEType: "text/plain", Text: out.Text,
			Meta: mcp.Meta{"doc_id": out.DocID, "source": out.Source, "title": out.Title},
		}}}, nil
	})
	srv.AddResourceTemplate(&mcp.ResourceTemplate{
		Name:        "block",
		Title:       "A block",
		Description: "A block's body with what a citation needs: source, title, byte span, page, heading path, doc_id, block_id, prompt_text.",
		URITemplate: blockURIPrefix + "{block_id}",
		MIMEType:    "application/json",
	}, func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		uri := req.Params.URI
		raw, ok := strings.CutPrefix(uri, blockURIPrefix)
		if !ok {
			return nil, mcp.ResourceNotFoundError(uri)
		}
		id, err := parseBlockID(raw)
		if err != nil {
			return nil, mcp.ResourceNotFoundError(uri)
		}
		exp, err := s.sv.expand(ctx, clearance, &ExpandInput{BlockID: id, Before: -1, After: -1})
		if err != nil {
			return nil, s.resourceError(ctx, uri, err)
		}
		data, err := json.Marshal(exp.Block)
		if err != nil {
			return nil, err
		}
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: "application/json", Text: string(data)}}}, nil
	})
	srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method != "resources/list" {
				return next(ctx, method, req)
			}
			var cursor string
			if p, ok := req.GetParams().(*mcp.ListResourcesParams); ok && p != nil {
				cursor = p.Cursor
			}
			return s.listResources(ctx, clearance, cursor)
		}
	})
}

// listResources lists a page of the documents clearance may see, by
// source; the cursor is the source of the last document of the previous
// page. Failed documents have no text to read and are not listed.
func (s *Server) listResources(ctx context.Context, clearance, cursor string) (*mcp.ListResourcesResult, error) {
	docs, err := s.sv.documents(ctx, clearance, &DocumentsInput{Status: index.StatusOK, Limit: ResourcesPage, After: cursor})
	if err != nil {
		return nil, s.resourceError(ctx, "", err)
	}
	out := &mcp.ListResourcesResult{Resources: []*mcp.Resource{}, NextCursor: docs.Next}
	for _, d := range docs.Documents {
		out.Resources = append(out.Resources, &mcp.Resource{
			URI: DocumentURI(d.DocID), Name: d.Source, Title: d.Title, MIMEType: "text/plain",
			Meta: mcp.Meta{"doc_id": d.DocID, "source": d.Source, "blocks": d.Blocks},
		})
	}
	return out, nil
}

// resourceError answers a missing resource and one above the clearance
// alike; other errors go to the log.
func (s *Server) resourceError(ctx context.Context, uri string, err error) error {
	if errors.Is(err, index.ErrNotFound) {
		return mcp.ResourceNotFoundError(uri)
	}
	s.log.ErrorContext(ctx, "resource failed", "uri", uri, "err", err)
	return errors.New("internal error (the server's log has the details)")
}
