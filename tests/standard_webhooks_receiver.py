#!/usr/bin/env python3
"""A webhook receiver that verifies Cellar's deliveries with the Standard
Webhooks reference library (`standardwebhooks` from PyPI), for
tests/webhook_signature_test.cc.

For each POST it records one JSON line in --out:
  {"path": ..., "events": <1, or a batch's length>, "id": <webhook-id>,
   "verified_by": [<bool per secret>],
   "tampered_rejected": <the same headers over a changed body fail>,
   "stale_rejected": <the same request ten minutes later fails>}
and answers 200 when a secret verified it, else 401.

  standard_webhooks_receiver.py --ready-file F --out deliveries.jsonl \
      --secret-env A [--secret-env B] [--cert server.pem --key server-key.pem]
Secrets are read from the named environment variables (whsec_...). Serves
HTTPS when given a certificate. Runs until SIGTERM.
"""
import argparse
import datetime as real_datetime
import json
import os
import signal
import ssl
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from unittest import mock

import standardwebhooks.webhooks as swh


class _TenMinutesLater(real_datetime.datetime):
    """datetime as the verifier sees it when a request is replayed later."""

    @classmethod
    def now(cls, tz=None):
        return real_datetime.datetime.now(tz) + real_datetime.timedelta(minutes=10)


def _verifies(hook, body, headers):
    try:
        hook.verify(body, headers)
        return True
    except swh.WebhookVerificationError:
        return False


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--ready-file", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--secret-env", action="append", required=True)
    parser.add_argument("--cert")
    parser.add_argument("--key")
    args = parser.parse_args()
    hooks = [swh.Webhook(os.environ[name]) for name in args.secret_env]
    lock = threading.Lock()
    out = open(args.out, "a", encoding="utf-8")

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as Cellar's client uses it

        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", "0"))).decode()
            headers = {k: v for k, v in self.headers.items()}
            # Under the lock: the replay check patches the module's clock.
            with lock:
                verified = [_verifies(h, body, headers) for h in hooks]
                tampered = [_verifies(h, body + " ", headers) for h in hooks]
                with mock.patch.object(swh, "datetime", _TenMinutesLater):
                    stale = [_verifies(h, body, headers) for h in hooks]
                batch = self.headers.get("Content-Type", "").startswith(
                    "application/cloudevents-batch+json")
                line = {
                    "path": self.path,
                    "events": len(json.loads(body)) if batch else 1,
                    "id": self.headers.get("webhook-id"),
                    "verified_by": verified,
                    "tampered_rejected": not any(tampered),
                    "stale_rejected": not any(stale),
                }
                out.write(json.dumps(line) + "\n")
                out.flush()
            answer = b'{"ok":true}' if any(verified) else b'{"error":"signature"}'
            self.send_response(200 if any(verified) else 401)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, fmt, *a):
            sys.stderr.write("receiver: " + (fmt % a) + "\n")

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    if args.cert:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(args.cert, args.key)
        server.socket = context.wrap_socket(server.socket, server_side=True)
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
    tmp = args.ready_file + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write("127.0.0.1:%d\n" % server.server_address[1])
    os.rename(tmp, args.ready_file)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
