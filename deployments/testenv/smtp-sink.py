"""SMTP sink for cardhour's tests: accepts every message on loopback and
writes it, byte for byte as received after DATA, to a maildir (DIR/new/).

    smtp-sink.py HOST PORT DIR

AUTH PLAIN/LOGIN is offered without TLS (loopback only) and optional: a
client that authenticates must use user "cardhour", password
"cardhour-smtp-test"; any other credentials are refused with 535.
Started and stopped by deployments/testenv/services.sh (aiosmtpd from PyPI).
"""

import os
import signal
import sys
import time
import uuid

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword

USER = b"cardhour"
PASSWORD = b"cardhour-smtp-test"


class MaildirSink:
    def __init__(self, root):
        self.root = root
        for sub in ("tmp", "new", "cur"):
            os.makedirs(os.path.join(root, sub), exist_ok=True)

    async def handle_DATA(self, server, session, envelope):
        name = "%d.%s.cardhour-sink" % (time.time_ns(), uuid.uuid4().hex)
        tmp = os.path.join(self.root, "tmp", name)
        head = "X-Sink-Mail-From: %s\r\nX-Sink-Rcpt-To: %s\r\n" % (
            envelope.mail_from,
            ", ".join(envelope.rcpt_tos),
        )
        with open(tmp, "wb") as f:
            f.write(head.encode("utf-8"))
            f.write(envelope.original_content or envelope.content)
        os.rename(tmp, os.path.join(self.root, "new", name))
        return "250 OK stored as " + name


def authenticator(server, session, envelope, mechanism, auth_data):
    ok = (
        isinstance(auth_data, LoginPassword)
        and auth_data.login == USER
        and auth_data.password == PASSWORD
    )
    # handled=False: aiosmtpd answers a refusal with 535 itself.
    return AuthResult(success=ok, handled=False)


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: smtp-sink.py HOST PORT DIR")
    host, port, root = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    controller = Controller(
        MaildirSink(root),
        hostname=host,
        port=port,
        authenticator=authenticator,
        auth_required=False,
        auth_require_tls=False,
        decode_data=False,
    )
    controller.start()
    print("smtp-sink: listening on %s:%d, maildir %s" % (host, port, root), flush=True)
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    while not stop:
        time.sleep(0.2)
    controller.stop()


if __name__ == "__main__":
    main()
