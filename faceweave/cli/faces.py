"""``faceweave faces``: list the faces found in a photo, optionally drawn."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

from faceweave.cli import console
from faceweave.cli.common import check_output_path, refuse_video
from faceweave.cli.option_flags import typer_command
from faceweave.option_schema import GivenOptions, reads_faces
from faceweave.options import CLI_WORDS, FACE_ORDERS, SelectionOptions, SwapOptions
from faceweave.types import Face


@dataclass(frozen=True)
class FacesArgs:
    """List the faces in IMAGE: index (in --order), box, size, score and head pose (with swap's face
    detector and landmarker flags, the faces and indices swap finds with them)."""

    image: Annotated[Path, typer.Argument(metavar="IMAGE", help="Photo to analyse.")]
    debug_image: Annotated[
        Path | None,
        typer.Option(
            "--debug-image",
            metavar="FILE",
            help="Write the photo with boxes, mesh and key points drawn (.png .jpg ...).",
        ),
    ] = None
    order: Annotated[
        str,
        typer.Option(
            "--order", metavar="ORDER", help=f"Face order, as used by swap --face-index: {'|'.join(FACE_ORDERS)}."
        ),
    ] = "large-small"
    embeddings: Annotated[
        bool, typer.Option("--embeddings", help="Also compute each face's 128-D identity embedding (in the JSON).")
    ] = False
    json_output: Annotated[bool, typer.Option("--json", help="Print the faces as JSON.")] = False
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Show library logs and tracebacks.")] = False
    options: GivenOptions = GivenOptions()


def run_faces(term: console.Terminal, args: FacesArgs) -> int:
    if args.debug_image is not None:
        check_output_path(args.debug_image, flag="--debug-image")
    SelectionOptions(order=args.order)  # validates --order
    options = args.options.swap_options(kind="photo", has_reference=None, words=CLI_WORDS)  # validates the flags
    refuse_video(args.image, role="image")
    return _faces(
        term,
        args.image,
        args.debug_image,
        order=args.order,
        embeddings=args.embeddings,
        options=options,
        json=args.json_output,
    )


def _faces(
    term: console.Terminal,
    image: Path,
    debug_image: Path | None,
    *,
    order: str,
    embeddings: bool,
    options: SwapOptions,
    json: bool,
) -> int:
    from faceweave.analysis import FaceAnalyser
    from faceweave.io import read_image, write_image
    from faceweave.selection import order_faces
    from faceweave.sessions import ModelSessions

    picture = read_image(image, max_pixels=options.max_pixels, role="image")
    sessions = ModelSessions(options.runtime)  # the chosen detector's and landmarker's files, checked first
    try:
        with FaceAnalyser(options.analysis, sessions=sessions) as analyser:
            faces = analyser.analyse(picture.pixels, embeddings=embeddings)
    finally:
        sessions.close()
    ranked = order_faces(faces, order)
    written = None
    if debug_image is not None:
        from faceweave.debug import draw_faces

        written = write_image(debug_image, draw_faces(picture.pixels, faces, order=ranked))
    rows = [_row(rank, faces[i], embeddings=embeddings) for rank, i in enumerate(ranked)]
    if json:
        term.json(
            {
                "image": str(image),
                "width": picture.width,
                "height": picture.height,
                "order": order,
                "faces": rows,
                "debug_image": str(written) if written else None,
            }
        )
        return console.EXIT_OK
    _print_table(term, image, rows)
    if written is not None:
        term.line(f"wrote {written}")
    return console.EXIT_OK


def _row(rank: int, face: Face, *, embeddings: bool) -> dict:
    row = {"index": rank, **face.summary(), "size": round(face.size, 1)}
    if embeddings and face.embedding is not None:
        row["embedding"] = [round(float(v), 5) for v in face.embedding]
    return row


def _print_table(term: console.Terminal, image: Path, rows: list[dict]) -> None:
    from rich.table import Table

    if not rows:
        term.line(f"no face found in {image}")
        return
    table = Table(title=f"{len(rows)} face(s) in {image.name}", title_justify="left")
    for name in ("index", "box", "size", "score", "yaw", "pitch", "roll"):
        table.add_column(name, justify="left" if name == "box" else "right")
    for row in rows:
        box = ", ".join(f"{v:.0f}" for v in row["box"])
        table.add_row(
            str(row["index"]),
            f"[{box}]",
            f"{row['size']:.0f}",
            f"{row['score']:.2f}",
            f"{row['yaw']:+.1f}",
            f"{row['pitch']:+.1f}",
            f"{row['roll']:+.1f}",
        )
    term.out.print(table)


#: ``faceweave faces``
faces_command = typer_command(FacesArgs, run_faces, kinds=("photo",), where=reads_faces)
