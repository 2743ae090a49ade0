"""``faceweave live``: swap faces in a camera, a network stream or a file
played at its own rate, into recordings, network pushes, a virtual camera
and a preview window at once; the newest frame wins, so the delay stays
bounded however slow the swap.  Ctrl-C (or closing the preview) ends the
session cleanly: the outputs are finished and the figures printed."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from faceweave import names
from faceweave.cli import console
from faceweave.cli.common import refuse_video
from faceweave.cli.option_flags import typer_command
from faceweave.cli.swap_flags import (
    AuditLogOption,
    JsonOutputOption,
    NoAudioOption,
    NoWatermarkOption,
    PresetOption,
    QualityOption,
    ReferenceFaceOption,
    ScaleOption,
    SourcesOption,
    VerboseOption,
)
from faceweave.errors import InvalidOptionError
from faceweave.option_schema import GivenOptions
from faceweave.options import CLI_WORDS, SwapOptions

if TYPE_CHECKING:
    from faceweave.live.audio import AudioTap
    from faceweave.live.inputs import LiveInput, Reconnect
    from faceweave.live.outputs import LiveOutput, OutputSpec
    from faceweave.live.reader import LiveReader
    from faceweave.live.session import LiveReport, LiveSession

_LIVE = "Live input and outputs"

InputArgument = Annotated[
    str,
    typer.Argument(
        metavar="INPUT",
        help="A camera (0, /dev/video0), a stream URL (rtsp:// rtmp:// srt:// udp:// rtp:// tcp:// http(s)://, "
        "HLS included) or a video file played at its own rate.",
        show_default=False,
    ),
]
LiveOutputOption = Annotated[
    list[str] | None,
    typer.Option(
        "--output",
        "-o",
        metavar="OUT",
        help="Repeatable: a recording (.mkv .mp4 .mov .ts .flv), a stream pushed to rtmp:// (FLV) or srt:// udp:// "
        "tcp:// (MPEG-TS), 'vcam' or 'vcam:/dev/videoN' (a virtual camera), 'preview' (a window).",
        rich_help_panel=_LIVE,
    ),
]
LoopOption = Annotated[
    bool, typer.Option("--loop", help="A file input starts again at its end.", rich_help_panel=_LIVE)
]
ReconnectOption = Annotated[
    int,
    typer.Option(
        "--reconnect",
        metavar="N",
        min=0,
        help="Network input: reopen it up to N times when it drops.",
        rich_help_panel=_LIVE,
    ),
]
ReconnectDelayOption = Annotated[
    float,
    typer.Option(
        "--reconnect-delay",
        metavar="S",
        min=0.01,
        help="Seconds before the first reopening; each next wait is twice as long (at most 8 s).",
        rich_help_panel=_LIVE,
    ),
]
TimeoutOption = Annotated[
    float,
    typer.Option(
        "--timeout",
        metavar="S",
        min=0.1,
        help="No data for S seconds: the input dropped (and the limit for opening it, or an output stream).",
        rich_help_panel=_LIVE,
    ),
]
DurationOption = Annotated[
    float | None,
    typer.Option("--duration", metavar="S", min=0.01, help="End after S seconds of input.", rich_help_panel=_LIVE),
]
InputFormatOption = Annotated[
    str | None,
    typer.Option(
        "--input-format",
        metavar="NAME",
        help="FFmpeg demuxer to read INPUT with (e.g. mpegts, v4l2).",
        rich_help_panel=_LIVE,
    ),
]
InputOptionOption = Annotated[
    list[str] | None,
    typer.Option(
        "--input-option",
        metavar="KEY=VALUE",
        help="Repeatable FFmpeg demuxer/protocol option for INPUT (e.g. video_size=1280x720, framerate=30, "
        "rtsp_transport=tcp).",
        rich_help_panel=_LIVE,
    ),
]


@dataclass(frozen=True)
class LiveArgs:
    """Swap the face from SOURCE photo(s) onto the face(s) in a live INPUT, in real time.

    Stale frames are dropped so that the delay stays bounded; Ctrl-C ends the
    session and finishes the outputs.  Every frame carries the invisible
    watermark, recordings and streams the AI-generated label."""

    input_: InputArgument
    sources: SourcesOption = None
    output: LiveOutputOption = None
    reference_face: ReferenceFaceOption = None
    loop: LoopOption = False
    reconnect: ReconnectOption = 3
    reconnect_delay: ReconnectDelayOption = 0.5
    timeout: TimeoutOption = 5.0
    duration: DurationOption = None
    input_format: InputFormatOption = None
    input_option: InputOptionOption = None
    scale: ScaleOption = 1.0
    no_audio: NoAudioOption = False
    preset: PresetOption = "veryfast"
    quality: QualityOption = None
    no_watermark: NoWatermarkOption = False
    audit_log: AuditLogOption = None
    json_output: JsonOutputOption = False
    verbose: VerboseOption = False
    options: GivenOptions = GivenOptions()

    def inputs(self) -> list[tuple[str, Path]]:
        """The photo inputs with their role, for the audit line."""
        found = [("source", p) for p in self.sources or []]
        return found + ([("reference", self.reference_face)] if self.reference_face is not None else [])


def run_live(term: console.Terminal, args: LiveArgs) -> int:
    """One session between opening the audit log and writing its line."""
    from faceweave.cli.marking import make_provenance, open_audit, write_audit

    log = open_audit(args.audit_log)
    provenance = make_provenance(no_watermark=args.no_watermark)
    options: dict[str, Any] = {
        "input": args.input_,
        "outputs": list(args.output or []),
        "no_watermark": args.no_watermark,
    }
    audit = dict(command="live", inputs=args.inputs(), options=options, provenance=provenance, output=None)
    try:
        code = _live(term, args, provenance)
    except BaseException as exc:
        write_audit(log, **audit, error=exc)
        raise
    write_audit(log, **audit, error=None)
    return code


def _live(term: console.Terminal, args: LiveArgs, provenance) -> int:
    """Check everything that can be checked before the models load, load
    them, open the input (only now: a stream opened earlier would back up
    while they load), then stream until the input ends or Ctrl-C."""
    from faceweave.live.audio import AudioTap
    from faceweave.live.reader import LiveReader
    from faceweave.pipeline import FaceSwapper
    from faceweave.video.pipeline import check_markable

    options = _options(args)
    spec, outputs, reconnect = _checked(args, keeps=options.swapper == names.NO_SWAPPER)
    tap = None if args.no_audio else AudioTap()
    with FaceSwapper(options) as swapper:
        session = _session(swapper, args, provenance)
        reader = LiveReader(
            spec,
            reconnect=reconnect,
            scale=args.scale,
            max_pixels=options.max_pixels,
            duration_s=args.duration,
            audio=tap,
        )
        with reader:
            check_markable((reader.info.width, reader.info.height), provenance)
            sinks = [_output(s, args, reader, provenance) for s in outputs]
            if not args.json_output:
                term.note(_banner(reader, outputs))
            report = _stream(session, reader, sinks, tap)
    _print_report(term, report, outputs, args.json_output)
    if reader.lost is not None:
        raise reader.lost
    return console.EXIT_OK


def _checked(args: LiveArgs, *, keeps: bool = False) -> tuple[LiveInput, list[OutputSpec], Reconnect]:
    """The input, the outputs and the reconnect policy, checked before any
    work (``keeps``: ``--swapper none``, which takes no source photo)."""
    from faceweave.live.inputs import Reconnect, parse_input, parse_options
    from faceweave.live.outputs import check_outputs, parse_output

    options = parse_options(args.input_option or [], flag="--input-option")
    spec = parse_input(args.input_, input_format=args.input_format, options=options, loop=args.loop)
    outputs = [parse_output(text) for text in args.output or []]
    check_outputs(outputs)
    if keeps and args.sources:
        raise InvalidOptionError("--swapper none keeps the faces: give no --source")
    if not args.sources and not keeps:
        raise InvalidOptionError("give a source photo with --source PHOTO")
    for path in args.sources or []:
        refuse_video(path, role="source")
    if args.reference_face is not None:
        refuse_video(args.reference_face, role="reference face")
    reconnect = Reconnect(attempts=args.reconnect, delay_s=args.reconnect_delay, timeout_s=args.timeout)
    return spec, outputs, reconnect


def _options(args: LiveArgs) -> SwapOptions:
    """The swap options of the flags, with a live stream's defaults."""
    return args.options.swap_options(kind="live", has_reference=args.reference_face is not None, words=CLI_WORDS)


def _session(swapper, args: LiveArgs, provenance) -> LiveSession:
    from faceweave.live.session import LiveOptions, LiveSession
    from faceweave.video.pipeline import VideoSwapper

    sources = list(args.sources or [])
    options = LiveOptions(provenance=provenance)
    return LiveSession(VideoSwapper(swapper, kind="live"), sources, reference=args.reference_face, options=options)


def _output(spec: OutputSpec, args: LiveArgs, reader: LiveReader, provenance) -> LiveOutput:
    from faceweave.cli.video import DEFAULT_VIDEO_QUALITY, video_crf
    from faceweave.live.endpoints import LatestFrame, VirtualCamera
    from faceweave.live.muxer import StreamMuxer
    from faceweave.provenance.stamp import video_metadata

    if spec.kind == "preview":
        return LatestFrame(spec)
    if spec.kind == "vcam":
        return VirtualCamera(spec)
    return StreamMuxer(
        spec,
        audio=reader.info.has_audio and not args.no_audio,
        crf=video_crf(args.quality or DEFAULT_VIDEO_QUALITY),  # as --quality's help says, for videos
        preset=args.preset,
        metadata=video_metadata(provenance),
        timeout_s=args.timeout,
    )


def _banner(reader: LiveReader, outputs: list[OutputSpec]) -> str:
    info = reader.info
    sound = ", audio" if info.has_audio else ""
    targets = ", ".join(s.label for s in outputs)
    shape = f"{info.width}x{info.height}, {float(info.rate):g} fps{sound}"
    return f"live: {reader.spec.url} ({shape}) -> {targets}; Ctrl-C ends"


def _stream(session: LiveSession, reader: LiveReader, sinks: list[LiveOutput], tap: AudioTap | None) -> LiveReport:
    """Run the session on its own thread; this (main) thread shows the
    preview, if any, and turns Ctrl-C into a clean stop.  The end is
    awaited on an event, not by joining: a join that Ctrl-C interrupts may
    take the thread for ended while it still runs."""
    from faceweave.live.endpoints import LatestFrame
    from faceweave.live.preview import show_preview

    outcome: dict[str, Any] = {}
    done = threading.Event()

    def run() -> None:
        try:
            outcome["report"] = session.run(reader, sinks, audio=tap)
        except BaseException as exc:  # noqa: BLE001 - raised on the main thread
            outcome["error"] = exc
        finally:
            done.set()

    preview = next((s for s in sinks if isinstance(s, LatestFrame)), None)
    threading.Thread(target=run, name="faceweave-live", daemon=True).start()
    try:
        if preview is not None and show_preview(preview, done.is_set):
            session.stop()
        while not done.wait(0.2):
            pass
    except KeyboardInterrupt:
        session.stop()
        while not done.wait(0.2):  # a second Ctrl-C is not caught
            pass
    except BaseException:
        session.stop()
        done.wait()
        raise
    if "error" in outcome:
        raise outcome["error"]
    return outcome["report"]


def _print_report(term: console.Terminal, report: LiveReport, outputs: list[OutputSpec], json_output: bool) -> None:
    def ms(value: float | None) -> float | None:
        return None if value is None else round(value, 1)

    if json_output:
        term.json(
            {
                "outputs": [s.label for s in outputs],
                "frames_in": report.frames_in,
                "frames_out": report.frames_out,
                "dropped": report.dropped,
                "dropped_share": round(report.dropped_share, 4),
                "frames_with_swap": report.frames_with_swap,
                "fps": round(report.fps, 2),
                "latency_p50_ms": ms(report.latency_p50_ms),
                "latency_p95_ms": ms(report.latency_p95_ms),
                "reconnects": report.reconnects,
                "end_reason": report.end_reason,
            }
        )
        return
    latency = ""
    if report.latency_p50_ms is not None and report.latency_p95_ms is not None:
        latency = f", latency p50 {report.latency_p50_ms:.0f} ms, p95 {report.latency_p95_ms:.0f} ms"
    term.line(
        f"{', '.join(s.label for s in outputs)}: {report.frames_out} frames ({report.fps:.1f} fps), {report.dropped}"
        f" dropped ({report.dropped_share:.0%}), faces swapped in {report.frames_with_swap}{latency};"
        f" {report.end_reason}"
    )


#: ``faceweave live``
live_command = typer_command(LiveArgs, run_live, kinds=("live",))
