"""A software passkey authenticator for the fast layer: what a browser and its authenticator
would send (WebAuthn's JSON, base64url), made with an EC P-256 key of the test's own. It is client
code only: the service verifies with py_webauthn, as it does a real authenticator's answers (the
browser tests use Chromium's virtual authenticator)."""

from __future__ import annotations

import base64
import hashlib
import json
import os
from typing import Any

import cbor2
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec

# Flags of authenticatorData (WebAuthn §6.1): user present, user verified, attested credential data.
UP, UV, AT = 0x01, 0x04, 0x40


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class SoftwareAuthenticator:
    def __init__(self, *, rp_id: str = "testserver", origin: str = "http://testserver"):
        self.rp_id, self.origin = rp_id, origin
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.credential_id = os.urandom(32)
        self.sign_count = 0

    @property
    def id(self) -> str:
        return b64url(self.credential_id)

    def _cose_key(self) -> bytes:
        numbers = self.key.public_key().public_numbers()
        # COSE_Key (RFC 9053): kty EC2, alg ES256, crv P-256, x, y.
        return cbor2.dumps({1: 2, 3: -7, -1: 1, -2: numbers.x.to_bytes(32, "big"), -3: numbers.y.to_bytes(32, "big")})

    def _client_data(self, kind: str, challenge: str) -> bytes:
        return json.dumps({"type": kind, "challenge": challenge, "origin": self.origin, "crossOrigin": False}).encode()

    def create(self, options: dict[str, Any]) -> str:
        """navigator.credentials.create's answer to `options` (py_webauthn's JSON), "none" attestation."""
        client_data = self._client_data("webauthn.create", options["challenge"])
        attested = bytes(16) + len(self.credential_id).to_bytes(2, "big") + self.credential_id + self._cose_key()
        auth_data = hashlib.sha256(self.rp_id.encode()).digest() + bytes([UP | UV | AT]) + (0).to_bytes(4, "big")
        attestation = cbor2.dumps({"fmt": "none", "attStmt": {}, "authData": auth_data + attested})
        return json.dumps({
            "id": self.id, "rawId": self.id, "type": "public-key", "clientExtensionResults": {},
            "response": {"clientDataJSON": b64url(client_data), "attestationObject": b64url(attestation),
                         "transports": ["internal"]},
        })  # fmt: skip

    def get(self, options: dict[str, Any], *, flags: int = UP | UV) -> str:
        """navigator.credentials.get's answer to `options`: the challenge signed, the counter moved on."""
        self.sign_count += 1
        client_data = self._client_data("webauthn.get", options["challenge"])
        auth_data = hashlib.sha256(self.rp_id.encode()).digest() + bytes([flags]) + self.sign_count.to_bytes(4, "big")
        signature = self.key.sign(auth_data + hashlib.sha256(client_data).digest(), ec.ECDSA(hashes.SHA256()))
        return json.dumps({
            "id": self.id, "rawId": self.id, "type": "public-key", "clientExtensionResults": {},
            "response": {"clientDataJSON": b64url(client_data), "authenticatorData": b64url(auth_data),
                         "signature": b64url(signature)},
        })  # fmt: skip
