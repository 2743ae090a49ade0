"""Read and write videos as streams of frames, in-process, with PyAV.

No ffmpeg binary and no temporary frame files: PyAV (FFmpeg inside its wheel)
demuxes, decodes, encodes and muxes, one frame at a time, so memory does not
grow with the video's length.  Frames are ``uint8`` RGB ``(H, W, 3)`` with the
container's rotation applied.  Times are seconds from the first video frame.

Inputs are checked at the boundary (missing, empty, images, audio only,
corrupt headers, no decodable frame); a stream that breaks mid-way ends the
reading cleanly and says where (:attr:`VideoReader.broken_at`).  Outputs are
written beside the target under a temporary name and renamed when complete.
"""

from faceweave.video.io.formats import GIF_MAX_FPS, OUTPUT_FORMATS, check_video_output
from faceweave.video.io.probe import (
    ACCEPTED_INPUT,
    VideoInfo,
    probe_output,
    probe_video,
)
from faceweave.video.io.reader import VideoFrame, VideoReader, parse_trim
from faceweave.video.io.writer import VideoWriter

__all__ = [
    "ACCEPTED_INPUT",
    "GIF_MAX_FPS",
    "OUTPUT_FORMATS",
    "VideoFrame",
    "VideoInfo",
    "VideoReader",
    "VideoWriter",
    "check_video_output",
    "parse_trim",
    "probe_output",
    "probe_video",
]
