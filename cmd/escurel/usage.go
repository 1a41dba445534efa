package main

import "fmt"

// usage prints the commands, their flags and the environment they read.
func (m *Main) usage() {
	fmt.Fprint(m.Stdout, `escurel: an embedded document index for retrieval-augmented generation

Usage:
  escurel [--index DIR] [--blobs URL] <command> [flags] [args]

Commands:
  ingest [--lang TAG] [--sensitivity LEVEL] [--max-file-bytes N] PATH...
                          ingest Markdown (.md, .markdown), text (.txt),
                          HTML (.html, .htm, .xhtml), PDF and DOCX files
                          (a PDF, by its first bytes, or a DOCX zip is
                          recognized whatever its name);
                          directories recursively. LEVEL: public
                          (default), internal or restricted, unless the front
                          matter says otherwise. A file that cannot be
                          extracted (corrupt, encrypted, empty, past a
                          limit) is kept as a failed document, listed by
                          status; one over N bytes (default 100 MiB) is
                          recorded unread. Prints a table per format
  search [-k N] [--json] [--clearance LEVEL] [--mode MODE] [--fusion F]
         [--explain] [--rerank URL] [--and] [--lang TAG] [--] QUERY
                          rank blocks: MODE bm25 (BM25F over body and
                          context), dense (vectors) or hybrid (both fused by
                          rrf or convex; the default with a trained
                          embedder, bm25 with hash); --alpha weighs the
                          dense leg, --depth its candidates; blocks
                          of documents above LEVEL (default public) never
                          appear; --explain shows each leg's rank and score;
                          --rerank reorders the hits with a reranker;
                          --and requires every term; put -- before a
                          query that starts with -
  expand [--json] [-n N] [--max-bytes B] [--clearance LEVEL] BLOCK_ID
                          a block with N neighbours each side (default 2)
                          and its window, at most B bytes (default 16 KiB)
                          besides the block's own body, always whole;
                          a block above LEVEL answers like a missing one
  sync [--dry-run] [--allow-delete-all] [--allow-downgrade] [--lang TAG]
       [--sensitivity LEVEL] [--max-file-bytes N] DIR...
                          ingest the files under DIR that are new or changed
                          (by size and modification time; bytes compared
                          before re-reading) and delete the documents whose
                          file under DIR is gone (a rename: delete and add;
                          the new name keeps the old one's sensitivity);
                          documents not stored from a file (uploads) are
                          left alone; picks files as ingest does; --dry-run
                          prints the plan; a plan deleting every document
                          under a missing or empty directory (DIR or one
                          below it: an unmounted disk) is refused unless
                          --allow-delete-all; --sensitivity lowering a
                          document's level is refused unless
                          --allow-downgrade
  documents [--json] [--source PREFIX] [--status ok|failed] [--clearance LEVEL]
                          the documents by source: doc id, title, type,
                          sensitivity, status, blocks, bytes, ingested at;
                          those above LEVEL (default public) are only
                          counted; failed ones with their reasons
  delete [--purge] SOURCE|DOC_ID...
                          remove documents (and their records in the blob
                          store, so rebuild does not bring them back);
                          --purge erases them: their blobs (unless another
                          document shares one), the live database rewritten
                          into a new generation without freed pages, and
                          every older generation (no rollback past a purge)
  gc [--dry-run]          remove orphan blobs (no record names them) and
                          crash leftovers (temporary files, unfinished
                          generations); prints what it reclaimed
  blobs pack              move a blob store of the loose layout (one file per
                          blob and record; stores made before packs were the
                          default, or with --loose-blobs) into packs: each
                          pack durable before the loose files go; safe to
                          run again after a crash; needs the index closed
                          (stop escurel serve)
  compact                 merge the full-text segments, dropping the postings
                          of deleted blocks (also automatic past 20% dead);
                          rewrite the file into a new generation when a tenth
                          of it is reclaimable (closing does past a fifth)
  status [--json] [--clearance LEVEL]
                          schema version, manifest, counts, the extractors
                          that read the documents, and the failed documents
                          with their reasons (for documents above LEVEL,
                          default public, only the kind of failure: a
                          reason may quote the document); with LEVEL
                          restricted also the reclaimable bytes (orphan
                          blobs, older generations, leftovers)
  rebuild [--contextualize MODE] [--chunker SPEC] [--embedder SPEC]
          [--analyzer NAME] [--allow-missing] [--allow-failures] [--keep N]
          [--workers N] [--dry-run]
                          re-derive the index from the blob store into a new
                          generation, with new settings if given, verify it
                          and make it live; keeps N generations (default 2);
                          refused when the store lacks live documents,
                          unless --allow-missing, or when documents that
                          are served now fail extraction, unless
                          --allow-failures; failed documents are tried again;
                          --dry-run prints the plan and changes nothing
  reembed --embedder SPEC [--keep N] [--workers N] [--dry-run]
                          give the index a new embedding set in a new
                          generation, without re-extracting, and make it live
  rollback [--force]      make the previous generation live again; refused
                          when documents changed in the blob store since it
                          was built, unless --force; refused past a purge,
                          even with --force
  export --parquet URL [--clearance LEVEL] [--json]
                          an operator's command: write documents.parquet,
                          blocks.parquet and vectors.parquet (schema in
                          ARCHITECTURE.md) to a directory or a bucket
                          (s3://bucket/prefix?region=…, gs://, azblob://);
                          the documents above LEVEL (default public) are
                          left out, with their blocks and vectors; with
                          restricted it writes every document's whole text
  verify [--json] [--deep]
                          digest of every derived row, and coverage checks
                          against the blob store; --deep also re-hashes
                          every blob; each damaged or missing one is named
                          with its document and repair; exit 1 on drift
  serve [--listen ADDR] [--tokens FILE] [--allow-write] [--allow-paths DIR]
        [--max-upload N] [--rerank URL] [--request-timeout D]
  serve --stdio [--clearance LEVEL] [--allow-write --stdio-write]
                          own the index and serve it: HTTP JSON under /v1
                          (OpenAPI at /v1/openapi.json), MCP at /mcp or
                          over stdio, /metrics; a caller's clearance comes
                          from its bearer token (default public); writes
                          as jobs, one at a time, with --allow-write; while
                          it serves, the other commands naming DIR run in it
  serve --replica-of URL [--poll D] [--check-digest] [--listen ADDR] [--tokens FILE] ...
                          a read replica: download the generation published
                          at URL into DIR (the replica's own, never the
                          writer's: refused), check its size and SHA-256
                          (and the digest of its rows when the publisher ran
                          another escurel binary, or with --check-digest),
                          serve it read-only, look for a newer one every D
                          (default 5s) and switch without downtime; status
                          and /metrics report its generation, digest and age
  publish --to URL [--json]
                          verify the live generation, upload a copy to URL
                          (s3://, gs://, azblob://, file://) as immutable
                          objects and move the published CURRENT there with
                          a conditional write; the same digest again is a
                          no-op; refused when it does not verify
  eval --beir DIR [--split test] [--mode MODE] [--fusion F] [--rerank URL]
       [--json] [--per-query FILE] [--k1 X] [--b X] [--b-context X]
       [--context-weight X] [--and]
                          nDCG@10, recall@100, MRR@10 and latency on a BEIR
                          dataset, in a temporary index
  version                 print the version

Global flags (also accepted after the command):
  --index DIR             index directory (env ESCUREL_INDEX; default ./.escurel)
  --blobs URL             blob store URL (env ESCUREL_BLOBS; default
                          file://<index dir>/blobs): file:///path,
                          s3://bucket/prefix?region=R (endpoint=URL and
                          use_path_style=true for MinIO and others),
                          gs://bucket/prefix, azblob://container/prefix;
                          credentials from the usual environment
                          (AWS_*, GOOGLE_APPLICATION_CREDENTIALS,
                          AZURE_STORAGE_*), never from the URL
  --loose-blobs           a new blob store keeps one file per blob and
                          record instead of packs (env ESCUREL_LOOSE_BLOBS=1);
                          an existing store keeps its layout
  --chunker SPEC          chunker (env ESCUREL_CHUNKER): default,
                          parent_child (small_to_big) or sentence_window,
                          with parameters, e.g.
                          'parent_child(max_bytes=400,parent_max_bytes=4000)'
                          or 'sentence_window(window=3)'; fixed when the
                          index is created, changed by rebuild
  --embedder SPEC         embedder (env ESCUREL_EMBEDDER): none, hash,
                          hash/DIM, openai:MODEL?url=URL&dim=N (or
                          dimensions=N, sent to the server),
                          ollama:MODEL?url=URL, onnx:NAME?path=DIR (with
                          ESCUREL_ONNXRUNTIME_LIB), with options
                          query_prefix, document_prefix, key_env, batch,
                          timeout, retries;
                          fixed when the index is created (default hash/384),
                          changed by rebuild; the url may change any time
  --extract-timeout D     time limit of one document's extraction, e.g. 30s
                          (env ESCUREL_EXTRACT_TIMEOUT; default 1m); past it
                          the document is kept as failed
  --max-unzipped-bytes N  bytes a DOCX may decompress to (env
                          ESCUREL_MAX_UNZIPPED_BYTES; default 256 MiB)

Environment:
  ESCUREL_INGEST_CONTEXTUALIZE=structural|off
                          store "[title › headings]" context beside each block
                          body (default structural); fixed when the index is
                          created, changed by rebuild
  ESCUREL_CACHE_DIR=DIR|off
                          where the compiled PDF engine is cached between
                          runs (default <user cache dir>/escurel/wasm);
                          without the cache each process compiles it again
                          (seconds)
`)
}
