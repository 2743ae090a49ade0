"""A browser's WebRTC offer as ``POST /v1/live`` receives it (:func:`parse_offer`):
checked before anything is reserved or loaded, so that an offer without a
camera, or one aiortc could not read (:func:`~faceweave.service.webrtc.sdp.offer_problem`),
is refused at once with a reason."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from faceweave.errors import InvalidOptionError, NoVideoTrackError
from faceweave.service.webrtc.sdp import offer_problem

#: the text fields of ``POST /v1/live`` (the photo is the file part ``source``)
OFFER_FIELDS = frozenset({"sdp", "type", "reservation", "skin_tone"})
#: the longest SDP taken (a browser's offer with one video track is a few kB)
MAX_SDP_CHARS = 60_000


@dataclass(frozen=True)
class Offer:
    """An SDP offer (``type`` is always ``"offer"``) that sends video;
    ``reservation``: the id of the place ``POST /v1/live/reservations`` held
    for it (the session's id then), or ``None`` to take a place now;
    ``skin_tone``: the session's ``SwapOptions.skin_tone`` (``None``: the
    default)."""

    sdp: str
    type: str = "offer"
    reservation: str | None = None
    skin_tone: float | None = None


def parse_offer(fields: Mapping[str, list[str]]) -> Offer:
    """The offer in the form fields ``sdp`` and ``type``.

    Raises:
        InvalidOptionError: an unknown field, no SDP, a type other than
            ``offer``, text that is not SDP, or SDP with a line aiortc cannot read.
        NoVideoTrackError: the offer sends no video (no camera track).
    """
    unknown = sorted(set(fields) - OFFER_FIELDS)
    if unknown:
        raise InvalidOptionError(
            f"unknown field '{unknown[0][:60]}'; POST /v1/live takes the fields sdp, type, reservation and "
            "skin_tone and the file part source"
        )
    values = {name: items[-1] for name, items in fields.items() if items}
    kind = values.get("type", "offer").strip()
    if kind != "offer":
        raise InvalidOptionError(f"type must be 'offer' (the browser's RTCSessionDescription), not '{kind[:40]}'")
    sdp = values.get("sdp", "")
    if not sdp.strip():
        raise InvalidOptionError("send the browser's SDP offer in the field 'sdp'")
    if len(sdp) > MAX_SDP_CHARS or not sdp.lstrip().startswith("v=0"):
        raise InvalidOptionError(
            f"field 'sdp' is not an SDP offer (it starts with v=0 and is under {MAX_SDP_CHARS} characters)"
        )
    if not sends_video(sdp):
        raise NoVideoTrackError(
            "the offer sends no video track: allow the camera and offer its video (getUserMedia({video: true}))"
        )
    problem = offer_problem(sdp)
    if problem is not None:
        raise InvalidOptionError(f"the SDP offer cannot be answered: {problem}")
    reservation = values.get("reservation", "").strip() or None
    return Offer(sdp=sdp, reservation=reservation, skin_tone=_skin_tone(values.get("skin_tone")))


def _skin_tone(text: str | None) -> float | None:
    """The field ``skin_tone``: a number from 0 to 1, or ``None`` when not sent."""
    if text is None or not text.strip():
        return None
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0.0 <= value <= 1.0:
        raise InvalidOptionError(
            f"field 'skin_tone' must be a number from 0 (the source's own skin) to 1 (the target's), not "
            f"'{text.strip()[:40]}'"
        )
    return value


def sends_video(sdp: str) -> bool:
    """Whether an SDP offer has a video section that sends (``sendrecv`` or
    ``sendonly``, the default when none is said) on a port other than 0."""
    for section in _media_sections(sdp):
        head = section[0].split()
        if len(head) < 2 or head[0] != "m=video" or head[1] == "0":
            continue
        directions = {line[2:] for line in section if line[2:] in ("sendrecv", "sendonly", "recvonly", "inactive")}
        if not directions or directions & {"sendrecv", "sendonly"}:
            return True
    return False


def _media_sections(sdp: str) -> list[list[str]]:
    sections: list[list[str]] = []
    for line in (raw.strip() for raw in sdp.splitlines()):
        if line.startswith("m="):
            sections.append([line])
        elif sections and line.startswith("a="):
            sections[-1].append(line)
    return sections
