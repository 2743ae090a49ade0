"""Provenance: the invisible watermark in every output (and, beside it, labels and audit)."""

from faceweave.provenance.payload import FACEWEAVE_TOOL_ID, PAYLOAD_VERSION, Payload
from faceweave.provenance.watermark import FrameMarker, Watermarker, WatermarkReading

__all__ = ["FACEWEAVE_TOOL_ID", "PAYLOAD_VERSION", "FrameMarker", "Payload", "WatermarkReading", "Watermarker"]
