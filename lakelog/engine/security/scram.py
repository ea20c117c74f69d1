"""Users' SCRAM credentials in the store, as Kafka keeps them in its metadata log.

One object per user, ``_lakelog/security/users/<user>.json``, holding per mechanism
(SCRAM-SHA-256, SCRAM-SHA-512) what RFC 5802 section 3 lets a server verify with and nothing
more: salt, iteration count, StoredKey and ServerKey. The password is never stored or logged.
The SCRAM exchange itself is the ``scramp`` library's (:func:`scram_server`); what is written
here by hand is the PLAIN check (:func:`verify_password`): PBKDF2 of the given password with the
stored salt and iterations, and the StoredKey it yields compared in constant time (RFC 5802's
``StoredKey := H(HMAC(SaltedPassword, "Client Key"))``). Kafka's PLAIN reads passwords from a
JAAS file; lakelog's PLAIN checks the same SCRAM credentials instead, so one
``lakelog configs --alter --add-config 'SCRAM-SHA-512=[password=...]'`` serves both.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import json
import os
from dataclasses import dataclass
from typing import Any

from scramp import ScramMechanism

from lakelog.engine.errors import InvalidConfigError, error_for_os_error
from lakelog.engine.groups.leases import file_name
from lakelog.engine.storage.object_store import filesystem, replace_file

USERS_DIR = "_lakelog/security/users"
MECHANISMS = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
# Kafka's ScramMechanism: minIterations 4096 (RFC 7677), maxIterations 16384.
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384
DEFAULT_ITERATIONS = 4096
# Kafka's wire codes of the mechanisms (ScramMechanism.type()).
MECHANISM_CODES = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}


@dataclass(frozen=True)
class ScramCredential:
    """What a server needs to verify one user's SCRAM proof (RFC 5802 section 3)."""

    mechanism: str
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def document(self) -> dict[str, Any]:
        b64 = base64.b64encode
        return {
            "salt": b64(self.salt).decode(),
            "stored_key": b64(self.stored_key).decode(),
            "server_key": b64(self.server_key).decode(),
            "iterations": self.iterations,
        }

    @classmethod
    def from_document(cls, mechanism: str, doc: dict[str, Any]) -> ScramCredential:
        b64 = base64.b64decode
        return cls(mechanism, b64(doc["salt"]), b64(doc["stored_key"]), b64(doc["server_key"]), int(doc["iterations"]))


def check_mechanism(mechanism: str) -> str:
    """``mechanism`` if lakelog keeps SCRAM credentials of it; raises InvalidConfigError naming it."""
    if mechanism not in MECHANISMS:
        raise InvalidConfigError(f"unknown SCRAM mechanism {mechanism!r}; known: {', '.join(MECHANISMS)}")
    return mechanism


def make_credential(
    mechanism: str, password: str, iterations: int = DEFAULT_ITERATIONS, salt: bytes | None = None
) -> ScramCredential:
    """The credential of ``password`` (a fresh random salt unless given). Raises
    InvalidConfigError for an unknown mechanism, an empty password or iterations outside
    Kafka's 4096-16384."""
    check_mechanism(mechanism)
    if not password:
        raise InvalidConfigError(f"{mechanism}: the password is empty")
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise InvalidConfigError(
            f"{mechanism}: iterations {iterations} outside {MIN_ITERATIONS}-{MAX_ITERATIONS} (Kafka's range)"
        )
    salt_, stored, server, count = ScramMechanism(mechanism).make_auth_info(
        password, iteration_count=iterations, salt=salt if salt is not None else os.urandom(32)
    )
    return ScramCredential(mechanism, salt_, stored, server, count)


def verify_password(credential: ScramCredential, password: str) -> bool:
    """Whether ``password`` is the one ``credential`` was made from (constant-time compare)."""
    digest = MECHANISMS[credential.mechanism]
    salted = hashlib.pbkdf2_hmac(digest, password.encode("utf-8"), credential.salt, credential.iterations)
    client_key = hmac.new(salted, b"Client Key", digest).digest()
    return hmac.compare_digest(hashlib.new(digest, client_key).digest(), credential.stored_key)


def scram_server(mechanism: str, lookup: Any) -> Any:
    """A scramp server for one exchange; ``lookup(user)`` returns the user's
    :class:`ScramCredential` of ``mechanism`` or raises KeyError (scramp then fails the exchange)."""

    def auth_info(user: str) -> tuple[bytes, bytes, bytes, int]:
        credential = lookup(user)
        return credential.salt, credential.stored_key, credential.server_key, credential.iterations

    return ScramMechanism(mechanism).make_server(auth_info)


class CredentialStore:
    """The users' credentials of one store. Thread-safe (no shared mutable state); every read
    goes to the store, so a change made through any agent is seen by the next read of every one."""

    def __init__(self, uri: str) -> None:
        self._fs, root = filesystem(uri)
        self.directory = f"{root}/{USERS_DIR}"

    def _path(self, user: str) -> str:
        return f"{self.directory}/{file_name(user)}.json"

    def credentials(self, user: str) -> dict[str, ScramCredential]:
        """The user's credentials by mechanism (empty for an unknown user)."""
        try:
            doc = json.loads(self._fs.cat_file(self._path(user)))
        except FileNotFoundError:
            return {}
        except OSError as exc:
            raise error_for_os_error(exc, f"reading the credentials of user {user!r}") from exc
        return {m: ScramCredential.from_document(m, d) for m, d in doc.get("mechanisms", {}).items()}

    def users(self) -> dict[str, dict[str, ScramCredential]]:
        """Every user with credentials, by name."""
        try:
            names = [e for e in self._fs.ls(self.directory, detail=False) if e.endswith(".json")]
        except FileNotFoundError:
            return {}
        found = {}
        for path in names:
            try:
                doc = json.loads(self._fs.cat_file(path))
            except FileNotFoundError:
                continue
            found[doc["user"]] = {m: ScramCredential.from_document(m, d) for m, d in doc["mechanisms"].items()}
        return found

    def _write(self, user: str, credentials: dict[str, ScramCredential]) -> None:
        try:
            if not credentials:
                with contextlib.suppress(FileNotFoundError):
                    self._fs.rm(self._path(user))
                return
            body = json.dumps({"user": user, "mechanisms": {m: c.document() for m, c in credentials.items()}})
            replace_file(self._fs, self.directory, f"{file_name(user)}.json", body.encode())
        except OSError as exc:
            raise error_for_os_error(exc, f"writing the credentials of user {user!r}") from exc

    def upsert(self, user: str, credential: ScramCredential) -> None:
        """Set the user's credential of ``credential.mechanism`` (others kept). Raises
        InvalidConfigError for an empty user name, StoreError when it could not be written."""
        if not user:
            raise InvalidConfigError("the user name is empty")
        credentials = self.credentials(user)
        credentials[credential.mechanism] = credential
        self._write(user, credentials)

    def delete(self, user: str, mechanism: str) -> bool:
        """Drop the user's credential of ``mechanism``; whether there was one."""
        credentials = self.credentials(user)
        if credentials.pop(check_mechanism(mechanism), None) is None:
            return False
        self._write(user, credentials)
        return True

    def authenticate_plain(self, user: str, password: str) -> bool:
        """Whether ``password`` matches one of the user's SCRAM credentials (PLAIN's check)."""
        return any(verify_password(c, password) for c in self.credentials(user).values())


def credential_from_salted_password(
    mechanism: str, salt: bytes, salted_password: bytes, iterations: int
) -> ScramCredential:
    """The credential AlterUserScramCredentials carries (the client sends the salt and
    ``SaltedPassword := Hi(password, salt, i)``, never the password; Kafka's
    ``ScramCredentialUpsertion``): StoredKey and ServerKey as RFC 5802 section 3 derives them.
    Raises InvalidConfigError for an unknown mechanism or iterations outside Kafka's range."""
    digest = MECHANISMS[check_mechanism(mechanism)]
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise InvalidConfigError(f"{mechanism}: iterations {iterations} outside {MIN_ITERATIONS}-{MAX_ITERATIONS}")
    if not salt or not salted_password:
        raise InvalidConfigError(f"{mechanism}: an empty salt or salted password")
    client_key = hmac.new(salted_password, b"Client Key", digest).digest()
    server_key = hmac.new(salted_password, b"Server Key", digest).digest()
    return ScramCredential(mechanism, salt, hashlib.new(digest, client_key).digest(), server_key, iterations)
