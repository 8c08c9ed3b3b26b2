"""A client of a Shoal topic's sidecar, standard library only (see README.md)."""

from .errors import (
    ShoalError,
    Unavailable,
    Busy,
    NoSpace,
    SequenceUnknown,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    TlsRequired,
    Unauthenticated,
)
from .producer import Producer, Delivery
from .consumer import Consumer, Event

__all__ = [
    "ShoalError", "Unavailable", "Busy", "NoSpace", "SequenceUnknown", "InvalidArgument",
    "NotFound", "PermissionDenied", "TlsRequired", "Unauthenticated",
    "Producer", "Delivery", "Consumer", "Event",
]
