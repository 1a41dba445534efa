#!/usr/bin/env python3
"""Search a running `escurel serve` and print citable hits.

Standard library only. Usage:

    python3 search.py "how do path parameters work" [--url http://127.0.0.1:7700] [--k 5] [--mode bm25]

A token for a clearance above public comes from the ESCUREL_TOKEN
environment variable (never a command-line argument, which other users
of the machine can read in the process list).
"""
import argparse
import json
import os
import sys
import urllib.error
import urllib.request


def search(url, query, k=5, mode=None, token=None):
    """POST /v1/search and return the decoded response: {"mode", "hits"}."""
    body = {"query": query, "k": k}
    if mode:
        body["mode"] = mode
    req = urllib.request.Request(
        url.rstrip("/") + "/v1/search",
        data=json.dumps(body).encode("utf-8"),
        headers={"Content-Type": "application/json", "Accept": "application/json"},
        method="POST",
    )
    if token:
        req.add_header("Authorization", "Bearer " + token)
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return json.load(resp)
    except urllib.error.HTTPError as e:
        # Errors are RFC 9457 problems: {"title", "status", "detail", "errors"}.
        problem = json.load(e)
        fields = "; ".join("%s: %s" % (f.get("location"), f.get("message")) for f in problem.get("errors") or [])
        raise SystemExit("escurel: %s: %s%s" % (problem.get("title"), problem.get("detail"), " (" + fields + ")" if fields else ""))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("query")
    p.add_argument("--url", default=os.environ.get("ESCUREL_URL", "http://127.0.0.1:7700"))
    p.add_argument("--k", type=int, default=5)
    p.add_argument("--mode", choices=["bm25", "dense", "hybrid"])
    args = p.parse_args()
    out = search(args.url, args.query, args.k, args.mode, os.environ.get("ESCUREL_TOKEN"))
    for i, hit in enumerate(out["hits"], 1):
        # Cite the block: its source, byte span and page; give a model the
        # window (prompt_text) when the chunker made one, else the body.
        where = "%s bytes %d-%d" % (hit["source"], hit["byte_start"], hit["byte_end"])
        if hit.get("page"):
            where += " p.%d" % hit["page"]
        print("%d. [%s] %s (score %.3f)" % (i, hit["block_id"], where, hit["score"]))
        text = hit.get("prompt_text") or hit["body"]
        print("   " + " ".join(text.split())[:200])


if __name__ == "__main__":
    sys.exit(main())
