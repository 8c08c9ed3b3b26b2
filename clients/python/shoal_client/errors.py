"""Typed errors from the sidecar's JSON answers: {"error": name, "reason": text}.

`retryable` says whether the same request may simply be sent again (an idempotent producer
resends with the same sequence numbers; docs/data-plane.md, "Errors").
"""


class ShoalError(Exception):
    """An answer other than 200, or no answer at all."""

    retryable = False

    def __init__(self, code, error, reason, status=0, body=None):
        super().__init__(f"{status or ''} {error}: {reason}".strip())
        self.code = code  # the "error" name, e.g. "unavailable"
        self.error = error
        self.reason = reason
        self.status = status  # the HTTP status; 0 when the sidecar did not answer
        self.body = body or {}


class Unavailable(ShoalError):
    """503 unavailable, or no answer: a change in progress, an owner that does not answer, a
    restart. Retry."""

    retryable = True


class Busy(Unavailable):
    """503 busy or too_many_connections: the sidecar's budgets are spent for now. Retry."""


class NoSpace(ShoalError):
    """507 no_space: the sidecar's volume is under its reserve. Nothing was stored; retry later."""

    retryable = True


class SequenceUnknown(ShoalError):
    """409 sequence_unknown: the producer state cannot decide some (producer, seq); `unknown`
    lists their indices in the request. Send those again under new sequence numbers."""

    @property
    def unknown(self):
        return list(self.body.get("unknown", []))


class InvalidArgument(ShoalError):
    """400/413/431 and the like: the request is wrong; sending it again will not help."""


class NotFound(ShoalError):
    """404: no such topic, endpoint or partition."""


class PermissionDenied(ShoalError):
    """403 permission_denied: the caller's grant does not cover this."""


class TlsRequired(ShoalError):
    """403 tls_required: this port is TLS only (use https with a client certificate)."""


class Unauthenticated(ShoalError):
    """401: a credential is missing."""


_BY_NAME = {
    "unavailable": Unavailable,
    "busy": Busy,
    "too_many_connections": Busy,
    "no_space": NoSpace,
    "sequence_unknown": SequenceUnknown,
    "not_found": NotFound,
    "permission_denied": PermissionDenied,
    "tls_required": TlsRequired,
    "unauthenticated": Unauthenticated,
}


def from_answer(status, body):
    """The error for an answer of `status` with the JSON object `body` (or None)."""
    body = body if isinstance(body, dict) else {}
    name = str(body.get("error", "")) or f"http_{status}"
    reason = str(body.get("reason", "")) or "no reason given"
    cls = _BY_NAME.get(name)
    if cls is None:
        cls = Unavailable if status >= 500 else NotFound if status == 404 else InvalidArgument
    return cls(name, name, reason, status, body)
