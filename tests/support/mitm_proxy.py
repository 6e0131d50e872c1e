"""A CONNECT proxy that intercepts: it answers the tunnel itself with a certificate of its own.

What a hostile or "inspecting" proxy does: to ``CONNECT host:port`` it says
``200 Connection established``, then speaks TLS as the server with its own
self-signed certificate for ``host`` (so only the chain is wrong, not the
name), reads the decrypted requests and answers them itself with a forged
product. It records every CONNECT, whether a TLS handshake completed, and
every request it read, headers included (``Authorization``: the API key).

It runs an asyncio loop in a thread of its own, listening on port 0.
"""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import json
import re
import ssl
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

if TYPE_CHECKING:
    from pathlib import Path

_PRODUCT_ID = re.compile(rb"/product/([^/?\s]+)")


def self_signed(directory: Path, host: str) -> tuple[Path, Path]:
    """A self-signed server certificate for ``host`` (an IP address or a name), and its key."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)])
    try:
        san: x509.GeneralName = x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        san = x509.DNSName(host)
    now = datetime.datetime.now(datetime.UTC)
    certificate = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
                   .serial_number(x509.random_serial_number())
                   .not_valid_before(now - datetime.timedelta(hours=1))
                   .not_valid_after(now + datetime.timedelta(days=2))
                   .add_extension(x509.SubjectAlternativeName([san]), critical=False)
                   .sign(key, hashes.SHA256()))
    directory.mkdir(parents=True, exist_ok=True)
    cert_path, key_path = directory / f"mitm-{host}.pem", directory / f"mitm-{host}.key"
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


@dataclass
class Seen:
    connects: list[str] = field(default_factory=list)  # "host:port" of each CONNECT
    handshakes: int = 0  # TLS handshakes completed with a client
    requests: list[tuple[str, dict[str, str]]] = field(default_factory=list)  # (request line, headers)

    def authorizations(self) -> list[str]:
        return [headers["authorization"] for _, headers in self.requests if "authorization" in headers]


class MitmProxy:
    """``with MitmProxy(directory, host) as proxy: ... proxy.url ... proxy.seen``."""

    def __init__(self, directory: Path, host: str = "127.0.0.1") -> None:
        cert, key = self_signed(directory, host)
        self._context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self._context.load_cert_chain(cert, key)
        self.seen = Seen()
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._server: asyncio.Server | None = None
        self._thread = threading.Thread(target=self._run, name="mitm-proxy", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> MitmProxy:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the MITM proxy did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._server = self._loop.run_until_complete(asyncio.start_server(self._client, "127.0.0.1", 0))
        self.port = self._server.sockets[0].getsockname()[1]
        self._ready.set()
        self._loop.run_forever()

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            line, _ = await _head(reader)
            method, target, _ = line.split(" ", 2)
            if method != "CONNECT":
                writer.write(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                return
            self.seen.connects.append(target)
            writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            await writer.drain()
            await writer.start_tls(self._context)  # the client's verification decides here
            self.seen.handshakes += 1
            while True:
                line, headers = await _head(reader)
                length = int(headers.get("content-length", "0"))
                if length:
                    await reader.readexactly(length)
                self.seen.requests.append((line, headers))
                found = _PRODUCT_ID.search(line.encode())
                product = found.group(1).decode() if found else "0"
                body = json.dumps({"id": int(product) if product.isdigit() else product,
                                   "name": "forged by the proxy", "price": 0.01}).encode()
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                             b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
                await writer.drain()
        except (OSError, ValueError, asyncio.IncompleteReadError, ssl.SSLError):
            pass  # a client that refused the certificate, or went away
        finally:
            writer.close()


async def _head(reader: asyncio.StreamReader) -> tuple[str, dict[str, str]]:
    """The request line and its headers (names lowercased)."""
    raw = await reader.readuntil(b"\r\n\r\n")
    lines = raw.decode("latin-1").split("\r\n")
    headers = {}
    for header in lines[1:]:
        if ":" in header:
            name, _, value = header.partition(":")
            headers[name.strip().lower()] = value.strip()
    return lines[0], headers
