"""The machine-readable "AI-generated" label: XMP for images, container tags for video.

A :class:`Label` says that a file was made by a trained algorithm (IPTC
digital source type ``trainedAlgorithmicMedia``), by which tool and version,
when, and in which run.  It is written as an XMP packet (PNG ``iTXt``
``XML:com.adobe.xmp``, JPEG APP1, WEBP ``XMP `` chunk) and as video container
tags (MP4/MOV with ``use_metadata_tags``, Matroska/WebM tags), and read back
from both.  Everything here is pure: bytes and dicts in, values out.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from xml.etree import ElementTree

#: IPTC NewsCodes digital source type for content made by a trained model
TRAINED_ALGORITHMIC_MEDIA = "http://cv.iptc.org/newscodes/digitalsourcetype/trainedAlgorithmicMedia"
NS_IPTC_EXT = "http://iptc.org/std/Iptc4xmpExt/2008-02-29/"
NS_XMP = "http://ns.adobe.com/xap/1.0/"
NS_RDF = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
NS_FACEWEAVE = "https://github.com/faceweave/faceweave/ns/provenance/1.0/"
#: the PNG iTXt keyword that holds XMP
PNG_XMP_KEY = "XML:com.adobe.xmp"
#: video container tag keys: a JSON statement, and a plain sentence for people
TAG_JSON = "faceweave_provenance"
TAG_COMMENT = "comment"
#: XMP packets larger than this are not parsed (a label is well under 2 KiB)
MAX_XMP_BYTES = 256 * 1024

_FIELDS = ("digital_source_type", "tool", "version", "created", "run_id")


@dataclass(frozen=True)
class Label:
    """What a labelled file says about itself.

    ``created`` is a UTC ISO-8601 time (``2025-01-31T12:00:00Z``); ``run_id`` is
    the run's id (the same one the watermark payload and the audit line carry).
    """

    tool: str
    version: str
    created: str
    run_id: str
    digital_source_type: str = TRAINED_ALGORITHMIC_MEDIA

    @property
    def ai_generated(self) -> bool:
        """Whether the digital source type says "made by a trained model"."""
        return self.digital_source_type.rstrip("/").endswith("trainedAlgorithmicMedia")

    def statement(self) -> str:
        """One sentence for people: ``AI-generated (trainedAlgorithmicMedia) by faceweave 0.1.0 at ...``."""
        kind = self.digital_source_type.rstrip("/").rsplit("/", 1)[-1]
        return f"AI-generated ({kind}) by {self.tool} {self.version} at {self.created}, run {self.run_id}"

    def as_dict(self) -> dict[str, str]:
        return asdict(self)


# --------------------------------------------------------------------- XMP


def to_xmp(label: Label) -> bytes:
    """``label`` as a complete UTF-8 XMP packet (``<?xpacket ...?>`` wrapped)."""
    attrs = {
        f"{{{NS_IPTC_EXT}}}DigitalSourceType": label.digital_source_type,
        f"{{{NS_XMP}}}CreatorTool": f"{label.tool} {label.version}",
        f"{{{NS_XMP}}}CreateDate": label.created,
        f"{{{NS_FACEWEAVE}}}Tool": label.tool,
        f"{{{NS_FACEWEAVE}}}Version": label.version,
        f"{{{NS_FACEWEAVE}}}RunId": label.run_id,
        f"{{{NS_FACEWEAVE}}}Statement": label.statement(),
    }
    body = "".join(f' {_qname(key)}="{_escape(value)}"' for key, value in attrs.items())
    xml = (
        '<?xpacket begin="\ufeff" id="W5M0MpCehiHzreSzNTczkc9d"?>\n'
        '<x:xmpmeta xmlns:x="adobe:ns:meta/">\n'
        f' <rdf:RDF xmlns:rdf="{NS_RDF}">\n'
        f'  <rdf:Description rdf:about="" xmlns:Iptc4xmpExt="{NS_IPTC_EXT}" xmlns:xmp="{NS_XMP}"'
        f' xmlns:faceweave="{NS_FACEWEAVE}"{body}/>\n'
        " </rdf:RDF>\n"
        "</x:xmpmeta>\n"
        '<?xpacket end="w"?>'
    )
    return xml.encode("utf-8")


def _qname(key: str) -> str:
    ns, local = key[1:].split("}")
    prefix = {NS_IPTC_EXT: "Iptc4xmpExt", NS_XMP: "xmp", NS_FACEWEAVE: "faceweave"}[ns]
    return f"{prefix}:{local}"


def _escape(value: str) -> str:
    return (
        value.replace("&", "&amp;")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace('"', "&quot;")
        .replace("\n", "&#10;")
    )


def from_xmp(packet: bytes | str | None) -> Label | None:
    """The :class:`Label` in an XMP packet, or ``None`` when there is none.

    Reads the IPTC ``DigitalSourceType`` (as an attribute or an element, so
    XMP written by other tools counts too) and faceweave's own fields; an XMP
    packet that is not well-formed, too large, or has no digital source type
    gives ``None``.
    """
    if not packet:
        return None
    raw = packet.encode("utf-8") if isinstance(packet, str) else bytes(packet)
    if len(raw) > MAX_XMP_BYTES:
        return None
    start, end = raw.find(b"<x:xmpmeta"), raw.rfind(b"</x:xmpmeta>")
    if start < 0 or end < 0:
        start, end = raw.find(b"<rdf:RDF"), raw.rfind(b"</rdf:RDF>")
        if start < 0 or end < 0:
            return None
        end += len(b"</rdf:RDF>")
    else:
        end += len(b"</x:xmpmeta>")
    if b"<!DOCTYPE" in raw[start:end] or b"<!ENTITY" in raw[start:end]:
        return None  # no entity expansion, ever
    try:
        root = ElementTree.fromstring(raw[start:end])
    except ElementTree.ParseError:
        return None
    found: dict[str, str] = {}
    for element in root.iter():
        for key, value in element.attrib.items():
            found.setdefault(key, value)
        if element.text and element.text.strip() and not list(element):
            found.setdefault(element.tag, element.text.strip())
    source_type = found.get(f"{{{NS_IPTC_EXT}}}DigitalSourceType")
    if not source_type:
        return None
    tool_text = found.get(f"{{{NS_XMP}}}CreatorTool", "")
    tool, _, version = tool_text.partition(" ")
    return Label(
        tool=found.get(f"{{{NS_FACEWEAVE}}}Tool", tool or "unknown"),
        version=found.get(f"{{{NS_FACEWEAVE}}}Version", version or "unknown"),
        created=found.get(f"{{{NS_XMP}}}CreateDate", ""),
        run_id=found.get(f"{{{NS_FACEWEAVE}}}RunId", ""),
        digital_source_type=source_type,
    )


# ------------------------------------------------------------ video tags


def to_tags(label: Label) -> dict[str, str]:
    """Container tags for ``label``: ``faceweave_provenance`` (JSON) and ``comment`` (a sentence)."""
    return {TAG_JSON: json.dumps(label.as_dict(), sort_keys=True), TAG_COMMENT: label.statement()}


_STATEMENT = re.compile(
    r"AI-generated \((?P<kind>[^)]+)\) by (?P<tool>\S+) (?P<version>\S+) at (?P<created>\S+), run (?P<run_id>\S+)"
)


def from_tags(tags: dict[str, str] | None) -> Label | None:
    """The :class:`Label` in container tags (keys matched case-insensitively),
    from the JSON tag or else from the ``comment`` sentence; ``None`` when absent."""
    if not tags:
        return None
    lowered = {str(k).lower(): str(v) for k, v in tags.items()}
    raw = lowered.get(TAG_JSON)
    if raw:
        try:
            data = json.loads(raw)
        except ValueError:
            data = None
        if isinstance(data, dict) and all(isinstance(data.get(f), str) for f in _FIELDS):
            return Label(**{f: data[f] for f in _FIELDS})
    for key in (TAG_COMMENT, "description"):
        match = _STATEMENT.search(lowered.get(key, ""))
        if match:
            kind = match["kind"]
            source_type = TRAINED_ALGORITHMIC_MEDIA if kind == "trainedAlgorithmicMedia" else kind
            return Label(
                tool=match["tool"],
                version=match["version"],
                created=match["created"],
                run_id=match["run_id"],
                digital_source_type=source_type,
            )
    return None
