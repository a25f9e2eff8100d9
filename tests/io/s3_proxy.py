#!/usr/bin/env python3
"""A proxy in front of an S3-compatible test server (s3rver), written from AWS's documentation
independently of cairn's C++ code. It checks what that server does not, and breaks what a test
asks it to:

- every request's Signature V4 (the Authorization header) is recomputed from the request with
  the secret key; a mismatch is answered 403 SignatureDoesNotMatch;
- a body with Content-MD5 is checked against it (400 BadDigest);
- AbortMultipartUpload, which s3rver lacks, is answered here, and the aborted upload's parts are
  refused from then on (404 NoSuchUpload);
- `If-None-Match: *` on a PUT is honoured (412 PreconditionFailed when the key exists) when the
  test turns `conditional` on;
- faults, set by POST /__proxy/faults with a JSON object: `fail_every` (every n-th request of
  `fail_match` answered `fail_status` with `fail_code`), `fail_count` (at most that many),
  `reset_after` (bytes of a request body after which its connection is dropped, once per
  `reset_count`), `corrupt_count` (request bodies of that many UploadParts altered before they
  are checked), `page_size` (listings answered in pages of that many entries, 1000 by default:
  every listing is computed by the proxy, see `listing`), `lose_match` and `lose_count` (that many requests of
  that operation done by the server, then their connection dropped unanswered: an answer lost
  on the way back), `latency` (seconds every request waits before it is forwarded: a slow
  store), `hold_match` and `hold_key` (the first request of that operation whose path and query,
  decoded, match that regular expression, after `hold_skip` of them, waits unforwarded until
  POST /__proxy/release: its sender frozen just before sending it);
- counters at GET /__proxy/stats: requests by operation, signature and digest failures, the most
  part uploads in flight at once, body bytes answered to ranged GETs.

Usage: s3_proxy.py LISTEN_PORT UPSTREAM_PORT ACCESS_KEY SECRET_KEY (prints "ready PORT").
"""

import hashlib
import hmac
import base64
import http.client
import http.server
import json
import re
import socket
import sys
import threading
import time
import urllib.parse
import xml.etree.ElementTree as ET
from xml.sax.saxutils import escape

ACCESS, SECRET = sys.argv[3], sys.argv[4]
UPSTREAM = ("127.0.0.1", int(sys.argv[2]))

lock = threading.Lock()
faults = {}
stats = {"requests": {}, "bad_signatures": 0, "bad_digests": 0, "parts_in_flight_max": 0,
         "ranged_bytes": 0, "aborted": 0, "injected": 0, "resets": 0, "corrupted": 0, "lost": 0,
         "held": 0, "released": 0}
released = threading.Event()
parts_in_flight = 0
aborted_uploads = set()
matched = {}


def uri_encode(text, keep_slash):
    safe = "-_.~" + ("/" if keep_slash else "")
    return urllib.parse.quote(text, safe=safe)


def operation_of(method, path, query):
    if path.startswith("/__proxy"):
        return "control"
    key = path.split("/", 2)[2] if path.count("/") >= 2 else ""
    if method == "PUT" and "partNumber" in query:
        return "UploadPart"
    if method == "POST" and "uploads" in query:
        return "CreateMultipartUpload"
    if method == "POST" and "uploadId" in query:
        return "CompleteMultipartUpload"
    if method == "DELETE" and "uploadId" in query:
        return "AbortMultipartUpload"
    if method == "GET" and not key:
        return "ListMultipartUploads" if "uploads" in query else "LIST"
    return method


def check_signature(handler, path, raw_query, body_hash_header):
    auth = handler.headers.get("Authorization", "")
    if not auth.startswith("AWS4-HMAC-SHA256 "):
        return "no Signature V4 Authorization header"
    fields = dict(part.strip().split("=", 1) for part in auth[len("AWS4-HMAC-SHA256 "):].split(","))
    credential = fields["Credential"].split("/")
    if credential[0] != ACCESS:
        return "unknown access key"
    date, region, service = credential[1], credential[2], credential[3]
    signed = fields["SignedHeaders"].split(";")
    for required in ("host", "x-amz-date", "x-amz-content-sha256"):
        if required not in signed:
            return "header %s not signed" % required
    for name in handler.headers.keys():
        if name.lower().startswith("x-amz-") and name.lower() not in signed:
            return "header %s sent and not signed" % name.lower()
    # The canonical request, as AWS's documentation defines it: the path URI-encoded once (S3),
    # the query's names and values encoded and sorted, the signed headers lower-cased, trimmed
    # and sorted, and the payload's hash as its header says.
    canonical_path = uri_encode(urllib.parse.unquote(path), True)
    pairs = urllib.parse.parse_qsl(raw_query, keep_blank_values=True)
    canonical_query = "&".join(
        "%s=%s" % (uri_encode(k, False), uri_encode(v, False)) for k, v in sorted(pairs))
    values = {}
    for name in signed:
        got = handler.headers.get_all(name) or []
        values[name] = ",".join(" ".join(v.split()) for v in got)
    canonical_headers = "".join("%s:%s\n" % (name, values[name]) for name in signed)
    canonical = "\n".join([handler.command, canonical_path, canonical_query, canonical_headers,
                           ";".join(signed), body_hash_header])
    scope = "/".join(credential[1:5])
    to_sign = "\n".join(["AWS4-HMAC-SHA256", handler.headers["x-amz-date"], scope,
                         hashlib.sha256(canonical.encode()).hexdigest()])
    key = ("AWS4" + SECRET).encode()
    for part in (date, region, service, "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    expected = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected, fields["Signature"]):
        return "signature differs"
    return None


def error_body(code, message):
    return ("<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>%s</Code><Message>%s</Message></Error>"
            % (code, message)).encode()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self, status, body=b"", headers=()):
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def read_body(self, op):
        length = int(self.headers.get("Content-Length", "0"))
        with lock:
            reset = faults.get("reset_after") if faults.get("reset_count", 0) > 0 and op == faults.get(
                "reset_match", "UploadPart") else None
            if reset is not None:
                faults["reset_count"] -= 1
                stats["resets"] += 1
        if reset is not None and length > reset:
            self.rfile.read(reset)
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return None
        return self.rfile.read(length) if length else b""

    def handle_any(self):
        global parts_in_flight
        parsed = urllib.parse.urlsplit(self.path)
        query = urllib.parse.parse_qs(parsed.query, keep_blank_values=True)
        op = operation_of(self.command, parsed.path, query)
        if op == "control":
            return self.control(parsed.path)
        with lock:
            stats["requests"][op] = stats["requests"].get(op, 0) + 1
        if self.headers.get("Expect", "").lower() == "100-continue":
            pass  # BaseHTTPRequestHandler has answered 100 Continue already
        body = self.read_body(op)
        if body is None:
            return
        with lock:
            latency = faults.get("latency", 0)
            hold = False
            target = urllib.parse.unquote(parsed.path) + "?" + urllib.parse.unquote(parsed.query)
            if faults.get("hold_match") == op and re.search(faults.get("hold_key", ""), target):
                if faults.get("hold_skip", 0) > 0:
                    faults["hold_skip"] -= 1
                elif not faults.get("held_once"):
                    faults["held_once"] = True
                    hold = True
                    stats["held"] += 1
        if latency:
            time.sleep(latency)
        if hold:
            released.wait(600)
            with lock:
                stats["held"] -= 1
                stats["released"] += 1
        with lock:
            if faults.get("corrupt_count", 0) > 0 and op == "UploadPart" and body:
                faults["corrupt_count"] -= 1
                stats["corrupted"] += 1
                body = bytes([body[0] ^ 0xFF]) + body[1:]
            fail = None
            if faults.get("fail_every") and (faults.get("fail_match") in (None, op)) and faults.get("fail_count", 1 << 30) > 0:
                matched["n"] = matched.get("n", 0) + 1
                if matched["n"] % faults["fail_every"] == 0:
                    faults["fail_count"] = faults.get("fail_count", 1 << 30) - 1
                    stats["injected"] += 1
                    fail = (faults.get("fail_status", 503), faults.get("fail_code", "SlowDown"))
        if fail:
            return self.answer(fail[0], error_body(fail[1], "injected by the test proxy"))
        problem = check_signature(self, parsed.path, parsed.query, self.headers.get("x-amz-content-sha256", ""))
        if problem:
            with lock:
                stats["bad_signatures"] += 1
            return self.answer(403, error_body("SignatureDoesNotMatch", problem))
        md5 = self.headers.get("Content-MD5")
        if md5 is not None and base64.b64encode(hashlib.md5(body).digest()).decode() != md5:
            with lock:
                stats["bad_digests"] += 1
            return self.answer(400, error_body("BadDigest", "The Content-MD5 you specified did not match what we received."))
        upload = query.get("uploadId", [None])[0]
        if op == "AbortMultipartUpload":
            with lock:
                aborted_uploads.add(upload)
                stats["aborted"] += 1
            return self.answer(204)
        if upload in aborted_uploads:
            return self.answer(404, error_body("NoSuchUpload", "The specified upload does not exist."))
        if self.command == "PUT" and self.headers.get("If-None-Match") == "*" and faults.get("conditional"):
            probe = http.client.HTTPConnection(*UPSTREAM)
            headers = {k: v for k, v in self.upstream_headers(0).items() if k.lower() != "if-none-match"}
            probe.request("HEAD", parsed.path, headers=headers)
            exists = probe.getresponse().status == 200
            probe.close()
            if exists:
                return self.answer(412, error_body("PreconditionFailed", "At least one of the pre-conditions you specified did not hold"))
        if op == "UploadPart":
            with lock:
                parts_in_flight += 1
                stats["parts_in_flight_max"] = max(stats["parts_in_flight_max"], parts_in_flight)
        if op == "LIST" and query.get("list-type") == ["2"]:
            return self.listing(parsed, query, faults.get("page_size", 1000))
        try:
            upstream = http.client.HTTPConnection(*UPSTREAM)
            upstream.request(self.command, self.path, body=body, headers=self.upstream_headers(len(body)))
            reply = upstream.getresponse()
            data = reply.read()
            headers = [(k, v) for k, v in reply.getheaders()
                       if k.lower() not in ("content-length", "transfer-encoding", "connection")]
            upstream.close()
        finally:
            if op == "UploadPart":
                with lock:
                    parts_in_flight -= 1
        with lock:
            lose = faults.get("lose_count", 0) > 0 and op == faults.get("lose_match")
            if lose:
                faults["lose_count"] -= 1
                stats["lost"] += 1
        if lose:  # done upstream, never answered
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        if self.headers.get("Range") and reply.status == 206:
            with lock:
                stats["ranged_bytes"] += len(data)
        self.send_response(reply.status)
        for name, value in headers:
            self.send_header(name, value)
        length = reply.getheader("Content-Length") if self.command == "HEAD" else None
        self.send_header("Content-Length", length if length is not None else str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def listing(self, parsed, query, page_size):
        # Every listing is computed here from s3rver's whole, undelimited one, as S3 defines it:
        # s3rver fails every listing it would truncate (so pages of `page_size` entries, as S3 gives
        # them with max-keys, are made here), and with a delimiter it leaves out the common prefix
        # of keys nested two levels or more below the prefix (its walk of its directories prunes
        # them before it reaches a key: lib/stores/filesystem.js, listObjects).
        token = query.pop("continuation-token", [""])[0]
        query.pop("max-keys", None)
        delimiter = query.pop("delimiter", [""])[0]
        prefix = query.get("prefix", [""])[0]
        path = parsed.path + "?" + urllib.parse.urlencode({k: v[0] for k, v in query.items()})
        upstream = http.client.HTTPConnection(*UPSTREAM)
        upstream.request("GET", path, headers=self.upstream_headers(0))
        reply = upstream.getresponse()
        data = reply.read()
        upstream.close()
        if reply.status != 200:
            return self.answer(reply.status, data)
        strip = lambda tag: tag.split("}", 1)[-1]
        entries, common = [], set()
        for element in ET.fromstring(data):
            if strip(element.tag) != "Contents":
                continue
            fields = {strip(child.tag): child.text or "" for child in element}
            key = fields["Key"]
            rest = key[len(prefix):]
            if delimiter and delimiter in rest:
                common.add(prefix + rest[:rest.index(delimiter) + len(delimiter)])
                continue
            entries.append((key, "<Contents>%s</Contents>" % "".join(
                "<%s>%s</%s>" % (name, escape(fields[name]), name)
                for name in ("Key", "LastModified", "ETag", "Size", "StorageClass") if name in fields)))
        entries += [(p, "<CommonPrefixes><Prefix>%s</Prefix></CommonPrefixes>" % escape(p)) for p in common]
        entries.sort()
        after = base64.b64decode(token).decode() if token else None
        rest = [entry for entry in entries if after is None or entry[0] > after]
        page, more = rest[:page_size], len(rest) > page_size
        body = "<?xml version=\"1.0\" encoding=\"UTF-8\"?><ListBucketResult>"
        body += "<Prefix>%s</Prefix>" % escape(prefix)
        if delimiter:
            body += "<Delimiter>%s</Delimiter>" % escape(delimiter)
        body += "<KeyCount>%d</KeyCount>" % len(page)
        body += "<IsTruncated>%s</IsTruncated>" % ("true" if more else "false")
        if more:
            body += "<NextContinuationToken>%s</NextContinuationToken>" % base64.b64encode(page[-1][0].encode()).decode()
        body += "".join(text for _, text in page)
        body += "</ListBucketResult>"
        return self.answer(200, body.encode(), [("Content-Type", "application/xml")])

    def upstream_headers(self, length):
        # s3rver checks no signature; it is given one it accepts, since this proxy checked the real one.
        out = {k: v for k, v in self.headers.items() if k.lower() not in ("content-length", "expect", "connection")}
        out["Content-Length"] = str(length)
        return out

    def control(self, path):
        if path == "/__proxy/stats":
            with lock:
                body = json.dumps(stats).encode()
            return self.answer(200, body, [("Content-Type", "application/json")])
        if path == "/__proxy/release":
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
            released.set()
            return self.answer(200)
        if path == "/__proxy/faults":
            length = int(self.headers.get("Content-Length", "0"))
            new = json.loads(self.rfile.read(length) or b"{}")
            released.set()  # whatever an earlier test held goes on
            with lock:
                released.clear()
                faults.clear()
                faults.update(new)
                matched.clear()
                for key in ("requests",):
                    stats[key] = {}
                for key in stats:
                    if key not in ("requests", "held"):
                        stats[key] = 0
            return self.answer(200)
        return self.answer(404)

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = handle_any


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


server = Server(("127.0.0.1", int(sys.argv[1])), Handler)
print("ready", server.server_address[1], flush=True)
server.serve_forever()
