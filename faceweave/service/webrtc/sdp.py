"""The lines of an SDP offer checked before aiortc reads them
(:func:`offer_problem`).  aiortc's parser asserts and indexes its way
through an offer, so one it cannot read raises whatever Python raises there
(``AssertionError``, ``AttributeError``, ``IndexError``, ...) with text that
means nothing to the caller.  Each line aiortc reads is checked here against
the form it expects, and the first problem is said in our words: what is
wrong in the offer, and what is taken.  A browser's
``RTCPeerConnection.createOffer()`` passes every check."""

from __future__ import annotations

import re
from collections.abc import Callable

#: what every refusal ends with: what is taken
TAKEN = "send the browser's RTCPeerConnection offer as it made it"
#: RTP payload types: 7 bits, and 72-76 would read as RTCP packet types (RFC 5761)
_PAYLOAD_TYPES = frozenset(range(128)) - frozenset(range(72, 77))
_MEDIA = re.compile(r"m=([^ ]+) ([0-9]+) ([A-Z/]+) (.+)")
_CONNECTION = re.compile(r"IN (IP4|IP6) ([^ ]+)")
_SETUP = ("actpass", "active", "passive")
_DIRECTIONS = frozenset({"sendrecv", "sendonly", "recvonly", "inactive"})
#: the a=fmtp parameters aiortc reads as whole numbers
_INT_PARAMETERS = frozenset({"apt", "max-fr", "max-fs", "maxplaybackrate", "minptime", "stereo", "useinbandfec"})
_CANDIDATE_TYPES = ("host", "srflx", "prflx", "relay")


def offer_problem(sdp: str) -> str | None:
    """What is wrong in ``sdp`` (one line, ending with what is taken), or
    ``None`` when aiortc can read every line of it and answer it."""
    session, sections = _split(sdp)
    for line in session:
        problem = _session_line(line)
        if problem is not None:
            return f"{problem}; {TAKEN}"
    mids: list[str | None] = []
    for index, section in enumerate(sections, start=1):
        problem = _section_problem(section, session)
        if problem is None:
            problem = _mid_problem(section, mids)
        if problem is not None:
            return f"media section {index} ({_clip(section[0])}): {problem}; {TAKEN}"
    problem = _bundle_problem(session, mids)
    return None if problem is None else f"{problem}; {TAKEN}"


def _split(sdp: str) -> tuple[list[str], list[list[str]]]:
    """The session's lines and each media section's, as aiortc groups them."""
    session: list[str] = []
    sections: list[list[str]] = []
    for line in sdp.splitlines():
        if line.startswith("m="):
            sections.append([line])
        elif sections:
            sections[-1].append(line)
        else:
            session.append(line)
    return session, sections


def _clip(text: str, limit: int = 60) -> str:
    """``text`` quoted for a message, at most ``limit`` characters of it."""
    return repr(text[:limit] + ("..." if len(text) > limit else ""))


def _session_line(line: str) -> str | None:
    if line.startswith("v=") and line.strip() != "v=0":
        return f"the line {_clip(line)} must be v=0"
    if line.startswith("c="):
        return _connection(line)
    if line.startswith("a="):
        name, value = _attribute(line)
        check = _SESSION_ATTRIBUTES.get(name)
        return check(value, line) if check is not None else None
    return None


def _section_problem(section: list[str], session: list[str]) -> str | None:
    problem = _media_line(section[0])
    if problem is not None:
        return problem
    kind = section[0][2:].split(" ", 1)[0]
    payload_types: set[int] = set()
    for line in section[1:]:
        if line.startswith("c="):
            problem = _connection(line)
        elif line.startswith("a="):
            problem = _media_attribute(line, kind, payload_types)
        if problem is not None:
            return problem
    for line in section[1:]:  # aiortc reads these once every rtpmap is read
        name, value = _attribute(line)
        head = (value or "").split(" ", 1)[0]
        if line.startswith("a=") and name == "fmtp" and int(head) not in payload_types:
            return f"{_clip(line)} sets parameters of payload type {head}, which no a=rtpmap names"
    return _transport_problem(kind, section[1:], session)


def _media_line(line: str) -> str | None:
    found = _MEDIA.fullmatch(line)
    if found is None:
        return (
            "the m= line must be 'm=KIND PORT PROTOCOL FORMAT...' with at least one format"
            " (m=video 9 UDP/TLS/RTP/SAVPF 96 97 ...)"
        )
    if not 0 <= int(found.group(2)) <= 65535:
        return f"the port {found.group(2)[:10]} is not 0-65535"
    if found.group(1) in ("audio", "video"):
        for token in found.group(4).split():
            if not token.isdecimal() or int(token) not in _PAYLOAD_TYPES:
                return f"the payload type {token[:10]!r} is not one of 0-71 or 77-127 (RTP's, outside RTCP's 72-76)"
    return None


def _media_attribute(line: str, kind: str, payload_types: set[int]) -> str | None:
    name, value = _attribute(line)
    if name == "rtpmap":
        problem = _rtpmap(value, line, kind)
        if problem is None:
            payload_types.add(int((value or "").split(" ", 1)[0]))
        return problem
    check = _MEDIA_ATTRIBUTES.get(name) or _SESSION_ATTRIBUTES.get(name)
    return check(value, line) if check is not None else None


def _transport_problem(kind: str, lines: list[str], session: list[str]) -> str | None:
    """What aiortc needs of every audio and video section: a direction and RTCP
    on the RTP port (said in it), DTLS and ICE (in it or in the session)."""
    if kind not in ("audio", "video"):
        return None
    said = {name: value for name, value in (_attribute(line) for line in (*session, *lines) if line.startswith("a="))}
    own = {_attribute(line)[0] for line in lines if line.startswith("a=")}  # aiortc reads these in the section only
    if not _DIRECTIONS & own:
        return "there is no direction (a=sendrecv, a=sendonly, a=recvonly or a=inactive)"
    if "setup" not in said:
        return "there is no a=setup (actpass, active or passive): the DTLS role is not said"
    if "fingerprint" not in said:
        return "there is no a=fingerprint: the DTLS certificate's hash is not said"
    if not said.get("ice-ufrag") or not said.get("ice-pwd"):
        return "there is no a=ice-ufrag and a=ice-pwd: the ICE credentials are not said"
    if "rtcp-mux" not in own:
        return "there is no a=rtcp-mux: this server takes RTP and RTCP on one port"
    return None


def _mid_problem(section: list[str], mids: list[str | None]) -> str | None:
    """The section's ``a=mid`` (the last, as aiortc keeps it) added to ``mids``; one another section has is refused."""
    attributes = (_attribute(line) for line in section[1:] if line.startswith("a="))
    found = [value for name, value in attributes if name == "mid"]
    mid = found[-1] if found else None
    if mid is not None and mid in mids:
        return f"the a=mid {_clip(mid, 20)} is another media section's too: each section has its own"
    mids.append(mid)
    return None


def _bundle_problem(session: list[str], mids: list[str | None]) -> str | None:
    """The first ``a=group:BUNDLE`` (the one aiortc uses) starts with a section's mid (the one whose
    transport the others share)."""
    for line in session:
        name, value = _attribute(line) if line.startswith("a=") else ("", None)
        bits = (value or "").split()
        if name == "group" and bits and bits[0] == "BUNDLE":
            if len(bits) > 1 and bits[1] not in mids:
                return f"the a=group:BUNDLE line starts with the mid {_clip(bits[1], 20)}, which no media section has"
            return None
    return None


def _attribute(line: str) -> tuple[str, str | None]:
    """An ``a=`` line's name and value (``None`` for a flag), as aiortc splits it."""
    name, colon, value = line[2:].partition(":")
    return name, value if colon else None


def _connection(line: str) -> str | None:
    if _CONNECTION.fullmatch(line[2:]) is None:
        return f"the line {_clip(line)} must be c=IN IP4 ADDRESS or c=IN IP6 ADDRESS (a browser sends c=IN IP4 0.0.0.0)"
    return None


def _tokens(value: str | None) -> list[str]:
    return (value or "").split()


def _fingerprint(value: str | None, line: str) -> str | None:
    if len(_tokens(value)) != 2:
        return f"{_clip(line)} must be a=fingerprint:ALGORITHM HASH (a=fingerprint:sha-256 AB:CD:...)"
    return None


def _setup(value: str | None, line: str) -> str | None:
    if value not in _SETUP:
        return f"{_clip(line)} must be a=setup:actpass, a=setup:active or a=setup:passive"
    return None


def _rtpmap(value: str | None, line: str, kind: str) -> str | None:
    head, _, encoding = (value or "").partition(" ")
    parts = encoding.split("/")
    numbers = parts[1:3] if kind == "audio" else parts[1:2]
    if not (head.isdecimal() and len(parts) >= 2 and parts[0] and all(p.isdecimal() for p in numbers)):
        return f"{_clip(line)} must be a=rtpmap:PAYLOAD_TYPE NAME/CLOCK_RATE[/CHANNELS] (a=rtpmap:96 VP8/90000)"
    return None


def _candidate(value: str | None, line: str) -> str | None:
    bits = _tokens(value)
    numbers = [bits[1], bits[3], bits[5]] if len(bits) >= 8 else []
    related = [bits[i + 1] for i in range(8, len(bits) - 1, 2) if bits[i] == "rport"]
    if (
        len(bits) < 8
        or not all(n.isdecimal() for n in numbers + related)
        or bits[2].lower() not in ("udp", "tcp")
        or bits[6] != "typ"
        or bits[7] not in _CANDIDATE_TYPES
    ):
        return (
            f"{_clip(line)} must be a=candidate:FOUNDATION COMPONENT udp|tcp PRIORITY ADDRESS PORT typ"
            " host|srflx|prflx|relay [raddr ADDRESS rport PORT] ..."
        )
    return None


def _extmap(value: str | None, line: str) -> str | None:
    bits = _tokens(value)
    if len(bits) != 2 or not bits[0].split("/", 1)[0].isdecimal() or bits[0].count("/") > 1:
        return f"{_clip(line)} must be a=extmap:ID[/DIRECTION] URI"
    return None


def _rtcp(value: str | None, line: str) -> str | None:
    port, space, rest = (value or "").partition(" ")
    if not port.isdecimal() or (space and _connection("c=" + rest) is not None):
        return f"{_clip(line)} must be a=rtcp:PORT [IN IP4 ADDRESS] (a=rtcp:9 IN IP4 0.0.0.0)"
    return None


def _leading_number(form: str, *, colon: bool = False) -> Callable[[str | None, str], str | None]:
    """A check that the value is a number, a space and the rest (with a ``:``
    in the rest when ``colon``); ``form`` names what is taken."""

    def check(value: str | None, line: str) -> str | None:
        head, space, rest = (value or "").partition(" ")
        if not head.isdecimal() or not space or (colon and ":" not in rest):
            return f"{_clip(line)} must be {form}"
        return None

    return check


def _fmtp(value: str | None, line: str) -> str | None:
    problem = _leading_number("a=fmtp:PAYLOAD_TYPE PARAMETERS")(value, line)
    if problem is not None:
        return problem
    for parameter in (value or "").partition(" ")[2].split(";"):
        name, equals, number = parameter.partition("=")
        if equals and name in _INT_PARAMETERS and not _is_int(number):
            return f"{_clip(line)}: the parameter {name} must be a whole number"
    return None


def _is_int(text: str) -> bool:
    return text.strip().lstrip("+-").isdecimal()


def _number(form: str) -> Callable[[str | None, str], str | None]:
    return lambda value, line: None if (value or "").isdecimal() else f"{_clip(line)} must be {form}"


def _rtcp_feedback(value: str | None, line: str) -> str | None:
    bits = (value or "").split(" ", 2)
    if value is None or (len(bits) < 2 and (bits[0] == "*" or bits[0].isdecimal())):
        return f"{_clip(line)} must be a=rtcp-fb:PAYLOAD_TYPE|* FEEDBACK"
    return None


def _ssrc_group(value: str | None, line: str) -> str | None:
    if value is None or not all(bit.isdecimal() for bit in value.split()[1:]):
        return f"{_clip(line)} must be a=ssrc-group:SEMANTICS SSRC..."
    return None


def _group(value: str | None, line: str) -> str | None:
    return f"{_clip(line)} must be {line.partition(':')[0]}:SEMANTICS ..." if value is None else None


_SESSION_ATTRIBUTES: dict[str, Callable[[str | None, str], str | None]] = {
    "fingerprint": _fingerprint,
    "setup": _setup,
    "group": _group,
    "msid-semantic": _group,
}
_MEDIA_ATTRIBUTES: dict[str, Callable[[str | None, str], str | None]] = {
    "candidate": _candidate,
    "extmap": _extmap,
    "rtcp": _rtcp,
    "fmtp": _fmtp,
    "rtcp-fb": _rtcp_feedback,
    "ssrc": _leading_number("a=ssrc:SSRC ATTRIBUTE:VALUE", colon=True),
    "ssrc-group": _ssrc_group,
    "sctpmap": _leading_number("a=sctpmap:NUMBER PROTOCOL"),
    "sctp-port": _number("a=sctp-port:PORT"),
    "max-message-size": _number("a=max-message-size:BYTES"),
}
