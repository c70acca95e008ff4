#!/usr/bin/env python3
"""A webhook receiver for Cellar's triggers in a few lines of Python (standard
library only), for the README's second tutorial. It checks each delivery's
Standard Webhooks signature with the secret in $HOOK_SECRET, prints one line
per event and refuses (422) trips without a fare, which Cellar then sets aside
in the trigger's dead-letter list. With --accept-all it takes them too.

  receiver.py ADDRESS_FILE [--accept-all]
Listens on 127.0.0.1, on the port in ADDRESS_FILE if it exists (a restart
keeps the address the trigger posts to), else on a free one written there.
"""
import base64, hashlib, hmac, http.server, json, os, sys, time

# [readme: receiver]
KEY = base64.b64decode(os.environ["HOOK_SECRET"].removeprefix("whsec_"))
ACCEPT_ALL = "--accept-all" in sys.argv


def signed_by_cellar(headers, body):
    msg_id, stamp = headers["webhook-id"], headers["webhook-timestamp"]
    mac = hmac.new(KEY, f"{msg_id}.{stamp}.".encode() + body, hashlib.sha256).digest()
    expected = "v1," + base64.b64encode(mac).decode()
    fresh = abs(time.time() - int(stamp)) < 300  # refuse replays
    return fresh and any(hmac.compare_digest(expected, s) for s in headers["webhook-signature"].split())


class Hook(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        if not signed_by_cellar(self.headers, body):
            return self.answer(401)
        event = json.loads(body)
        if "fare" not in (event["body"] or {}) and not ACCEPT_ALL:
            print(f"refused {event['row_key']} ref {event['ref_key']}: no fare", flush=True)
            return self.answer(422)
        print(f"got {event['row_key']} ref {event['ref_key']}: {json.dumps(event['body'])}", flush=True)
        self.answer(200)

    # [end]
    def answer(self, code):
        self.send_response(code)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


address_file = sys.argv[1]
port = int(open(address_file).read().split(":")[1]) if os.path.exists(address_file) else 0
http.server.ThreadingHTTPServer.allow_reuse_address = True
for attempt in range(50):  # a restarted receiver waits for its predecessor to let go
    try:
        server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Hook)
        break
    except OSError:
        if attempt == 49:
            raise
        time.sleep(0.1)
with open(address_file, "w") as f:
    f.write(f"127.0.0.1:{server.server_address[1]}\n")
server.serve_forever()
