"""A connection's security session: its listener, advertised address, client host and principal."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from lakelog.kafka_endpoint.listeners import Listener
from lakelog.kafka_endpoint.messages import Request

ANONYMOUS = "User:ANONYMOUS"


@dataclass
class Session:
    """What one connection is: the listener it came in on, the address that listener is
    advertised at, the client's host, and who it is (``User:ANONYMOUS`` until it authenticates,
    or its certificate's subject on an SSL listener)."""

    listener: Listener
    advertised: tuple[str, int]
    client_host: str
    principal: str = ANONYMOUS
    authenticated: bool = True
    mechanism: str | None = None
    raw_tokens: bool = False  # after a v0 handshake: the next frame is a bare SASL token
    closing: bool = False  # the answer being sent is the last (a failed authentication)
    exchange: Any = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def open(
        cls, listener: Listener, advertised: tuple[str, int], client_host: str, cert_principal: str | None
    ) -> Session:
        session = cls(listener, advertised, client_host, authenticated=not listener.sasl)
        if cert_principal is not None and not listener.sasl:
            session.principal = cert_principal
        return session

    def log_context(self, client_id: str | None = None) -> dict[str, str | None]:
        """The fields a log line about this connection carries (``extra=``; JSON logs show them)."""
        return {
            "client_id": client_id,
            "client_host": self.client_host,
            "principal": self.principal,
            "listener": str(self.listener),
        }


def advertised_address(request: Request, default: tuple[str, int]) -> tuple[str, int]:
    """The address to tell the client of ``request`` this agent is at: the advertised address of
    the listener the request came in on (``default`` for a request of no listener)."""
    session = request.session
    return session.advertised if session is not None else default
