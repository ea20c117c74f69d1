"""A connection's security session and the SASL APIs (SaslHandshake, SaslAuthenticate).

The exchange follows Kafka's ``SaslServerAuthenticator``: SaslHandshake names a mechanism of
``sasl.enabled.mechanisms`` (else UNSUPPORTED_SASL_MECHANISM with the enabled ones), then the
mechanism's tokens travel in SaslAuthenticate requests (handshake v1) or as bare size-prefixed
frames (handshake v0, KIP-152's predecessor). Until a SASL listener's client has authenticated,
only ApiVersions, SaslHandshake and SaslAuthenticate are answered; anything else closes the
connection, and so does a failed authentication (after its answer), as Kafka does.

SCRAM (RFC 5802/7677) is the ``scramp`` library's server over the credentials in the store;
PLAIN (RFC 4616: ``authzid NUL authcid NUL password``) is parsed here and checked against the
same credentials (:meth:`engine.security.scram.CredentialStore.authenticate_plain`). No token,
password or proof is ever logged; a failure is logged with the user name only.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.sasl_authenticate.v0.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v0.request import SaslHandshakeRequest

from lakelog.engine.security.scram import MECHANISMS, CredentialStore, scram_server
from lakelog.kafka_endpoint.messages import Request, api_key, build, response_class
from lakelog.kafka_endpoint.session import Session

log = logging.getLogger(__name__)

SASL_HANDSHAKE = api_key(SaslHandshakeRequest)
SASL_AUTHENTICATE = api_key(SaslAuthenticateRequest)
VERSIONS: dict[int, tuple[int, int]] = {SASL_HANDSHAKE: (0, 1), SASL_AUTHENTICATE: (0, 2)}


class SaslApis:
    """SaslHandshake and SaslAuthenticate over the store's credentials."""

    def __init__(self, store_uri: str, mechanisms: Sequence[str]) -> None:
        self.credentials = CredentialStore(store_uri)
        self.mechanisms = tuple(mechanisms)

    def handlers(self) -> dict[int, Callable[[Request], Any]]:
        return {SASL_HANDSHAKE: self.handshake, SASL_AUTHENTICATE: self.authenticate}

    def handshake(self, request: Request) -> Any:
        session: Session = request.session
        cls = response_class(SASL_HANDSHAKE, request.api_version)
        asked = request.body.mechanism
        if session is None or not session.listener.sasl or session.mechanism is not None:
            if session is not None:
                session.closing = True
            return build(cls, error_code=ErrorCode.illegal_sasl_state, mechanisms=list(self.mechanisms))
        if asked not in self.mechanisms:
            return build(cls, error_code=ErrorCode.unsupported_sasl_mechanism, mechanisms=list(self.mechanisms))
        session.mechanism = asked
        session.raw_tokens = request.api_version == 0
        return build(cls, error_code=ErrorCode.none, mechanisms=list(self.mechanisms))

    def authenticate(self, request: Request) -> Any:
        session: Session = request.session
        cls = response_class(SASL_AUTHENTICATE, request.api_version)
        if session is None or session.mechanism is None or session.authenticated:
            if session is not None:
                session.closing = True
            return build(cls, error_code=ErrorCode.illegal_sasl_state, error_message="no SASL handshake before")
        reply, failure = self.step(session, request.body.auth_bytes)
        if failure is not None:
            return build(cls, error_code=ErrorCode.sasl_authentication_failed, error_message=failure, auth_bytes=b"")
        return build(cls, error_code=ErrorCode.none, auth_bytes=reply)

    def step(self, session: Session, token: bytes) -> tuple[bytes, str | None]:
        """One token of the session's exchange: the server's reply and, when the exchange failed,
        Kafka's message for it (the session is then marked ``closing``)."""
        with session.lock:
            try:
                if session.mechanism == "PLAIN":
                    return self._plain(session, token), None
                return self._scram(session, token), None
            except _Refused as refused:
                session.closing = True
                log.warning(
                    "authentication of %r from %s on %s failed (%s)",
                    refused.user,
                    session.client_host,
                    session.listener,
                    session.mechanism,
                    extra=session.log_context(),
                )
                return (
                    b"",
                    "Authentication failed during authentication due to invalid credentials with SASL mechanism "
                    f"{session.mechanism}",
                )

    def _plain(self, session: Session, token: bytes) -> bytes:
        parts = token.split(b"\0")
        if len(parts) != 3:
            raise _Refused(None)
        authzid, user, password = (p.decode("utf-8", "replace") for p in parts)
        if not user or (authzid and authzid != user) or not self.credentials.authenticate_plain(user, password):
            raise _Refused(user)
        self._done(session, user)
        return b""

    def _scram(self, session: Session, token: bytes) -> bytes:
        mechanism = session.mechanism
        assert mechanism in MECHANISMS
        try:
            if session.exchange is None:
                users: dict[str, Any] = {}

                def lookup(user: str) -> Any:
                    users["name"] = user
                    return self.credentials.credentials(user)[mechanism]

                server = scram_server(mechanism, lookup)
                server.set_client_first(token.decode("utf-8"))
                session.exchange = (server, users)
                return server.get_server_first().encode("utf-8")
            server, users = session.exchange
            server.set_client_final(token.decode("utf-8"))
            final = server.get_server_final().encode("utf-8")
        except Exception as exc:  # scramp's ScramException, KeyError of an unknown user, bad UTF-8
            name = session.exchange[1].get("name") if session.exchange else None
            raise _Refused(name) from exc
        self._done(session, users["name"])
        return final

    def _done(self, session: Session, user: str) -> None:
        session.principal = f"User:{user}"
        session.authenticated = True
        session.exchange = None
        log.info(
            "%s authenticated from %s on %s (%s)",
            session.principal,
            session.client_host,
            session.listener,
            session.mechanism,
            extra=session.log_context(),
        )


class _Refused(Exception):
    def __init__(self, user: str | None) -> None:
        super().__init__(user)
        self.user = user
