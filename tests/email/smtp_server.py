"""A real SMTP server for tests/email.rs (aiosmtpd, pinned in scripts/email-deps.sh).

STARTTLS required (with the test's own CA's certificate), AUTH required and only over TLS, as
SES's SMTP interface and most submission servers are. Every message is written to --dir as
<n>.eml (the bytes as received) beside <n>.json (the envelope, and whether TLS and AUTH were
used); the .eml appears last, whole. Prints "ready" once it accepts connections.
"""
import argparse
import json
import os
import ssl
import threading

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword


class Save:
    def __init__(self, folder):
        self.folder = folder
        self.count = 0
        self.lock = threading.Lock()

    async def handle_DATA(self, server, session, envelope):
        with self.lock:
            self.count += 1
            base = os.path.join(self.folder, f"{self.count:04}")
        meta = {
            "mail_from": envelope.mail_from,
            "rcpt_tos": envelope.rcpt_tos,
            "tls": session.ssl is not None,
            "authenticated": bool(session.authenticated),
        }
        with open(base + ".json", "w") as f:
            json.dump(meta, f)
        with open(base + ".eml.part", "wb") as f:
            f.write(envelope.original_content)
        os.rename(base + ".eml.part", base + ".eml")
        return "250 2.0.0 saved"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--dir", required=True)
    p.add_argument("--cert", required=True)
    p.add_argument("--key", required=True)
    p.add_argument("--user", required=True)
    p.add_argument("--password", required=True)
    a = p.parse_args()

    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(a.cert, a.key)

    def authenticate(server, session, envelope, mechanism, auth_data):
        ok = (
            isinstance(auth_data, LoginPassword)
            and auth_data.login == a.user.encode()
            and auth_data.password == a.password.encode()
        )
        return AuthResult(success=ok)

    controller = Controller(
        Save(a.dir),
        hostname="127.0.0.1",
        port=a.port,
        server_hostname="localhost",
        tls_context=tls,
        require_starttls=True,
        authenticator=authenticate,
        auth_required=True,
        auth_require_tls=True,
    )
    controller.start()
    print("ready", flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main()
