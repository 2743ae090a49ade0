"""The ``faceweave`` command line, run as a subprocess.

Every failure must be one clean ``error: ...`` line on stderr (no traceback,
no mediapipe / TensorFlow Lite / absl noise), the documented exit code, and
no output file left behind.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

NOISE = ("Traceback", "WARNING:", "INFO:", "absl", "W0000", "I0000", "E0000")
TIMEOUT_S = 300


def faceweave(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "faceweave.cli", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        cwd=cwd,
    )


def assert_clean_error(proc: subprocess.CompletedProcess, code: int, *fragments: str) -> None:
    stderr = proc.stderr.strip()
    assert proc.returncode == code, f"exit {proc.returncode}\nstdout: {proc.stdout}\nstderr: {proc.stderr}"
    assert not any(noise in proc.stderr for noise in NOISE), proc.stderr
    assert len(stderr.splitlines()) == 1 and stderr.startswith("error: "), proc.stderr
    for fragment in fragments:
        assert fragment.lower() in stderr.lower(), stderr
    assert proc.stdout == "", proc.stdout


def assert_no_noise(proc: subprocess.CompletedProcess) -> None:
    assert proc.returncode == 0, f"exit {proc.returncode}\nstdout: {proc.stdout}\nstderr: {proc.stderr}"
    assert not any(noise in proc.stderr + proc.stdout for noise in NOISE), proc.stderr


@pytest.fixture(scope="module")
def bad_files(tmp_path_factory, faces_dir: Path) -> Path:
    """A text file named .jpg and a JPEG cut in half."""
    folder = tmp_path_factory.mktemp("bad")
    (folder / "not_an_image.jpg").write_text("this is not a picture\n")
    jpeg = (faces_dir / "single/biden2.jpg").read_bytes()
    (folder / "truncated.jpg").write_bytes(jpeg[: len(jpeg) // 2])
    return folder


def swap_args(
    faces_dir: Path,
    out: Path,
    *,
    source: str = "single/biden2.jpg",
    target: str = "single/astronaut_eileen_collins.png",
) -> list:
    return ["swap", "-s", faces_dir / source, "-t", faces_dir / target, "-o", out]


# (case id, extra arguments after the standard swap, source, target, exit code, fragments of the message)
QUICK_ERRORS = [
    ("missing-source", [], "single/does_not_exist.jpg", None, 2, ["does_not_exist.jpg"]),
    ("not-an-image", [], "BAD/not_an_image.jpg", None, 2, ["not_an_image.jpg"]),
    ("truncated-image", [], "BAD/truncated.jpg", None, 2, ["truncated.jpg"]),
    ("video-target-to-image", [], None, "video/lp_d18_talking_face.mp4", 2, ["--output", ".mp4"]),
    ("video-as-source", [], "video/lp_d18_talking_face.mp4", None, 2, ["source", "is a video"]),
    ("too-many-pixels", ["--max-pixels", "1000"], None, None, 2, ["pixels", "limit"]),
    ("bad-working-size", ["--working-size", "5"], None, None, 2, ["--working-size"]),
    ("bad-faces-mode", ["--faces", "all"], None, None, 2, ["--faces"]),
    ("reference-without-photo", ["--faces", "reference"], None, None, 2, ["--reference-face"]),
]


@pytest.mark.parametrize(
    "args, source, target, code, fragments", [c[1:] for c in QUICK_ERRORS], ids=[c[0] for c in QUICK_ERRORS]
)
def test_swap_input_errors(tmp_path, faces_dir, bad_files, args, source, target, code, fragments):
    out = tmp_path / "out.png"
    kwargs = {
        "source": source.replace("BAD", str(bad_files)) if source and source.startswith("BAD") else source,
        "target": target,
    }
    cmd = swap_args(faces_dir, out, **{k: v for k, v in kwargs.items() if v is not None})
    proc = faceweave(*cmd, *args)
    assert_clean_error(proc, code, *fragments)
    assert not out.exists()
    assert list(tmp_path.iterdir()) == []


def test_bad_output_extension_is_refused_before_any_work(tmp_path, faces_dir):
    out = tmp_path / "out.gif"
    # the missing source would fail later: the extension must be checked first
    proc = faceweave("swap", "-s", tmp_path / "missing.jpg", "-t", faces_dir / "single/biden2.jpg", "-o", out)
    assert_clean_error(proc, 2, "out.gif", ".gif")
    assert list(tmp_path.iterdir()) == []


def test_unknown_option_is_a_usage_error(tmp_path, faces_dir):
    proc = faceweave(*swap_args(faces_dir, tmp_path / "out.png"), "--no-such-option")
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and "no-such-option" in proc.stderr
    assert list(tmp_path.iterdir()) == []


def test_version():
    proc = faceweave("--version")
    assert proc.returncode == 0 and proc.stdout.startswith("faceweave ")


# swaps that get as far as face analysis (models load: seconds each)
SLOW_ERRORS = [
    ("no-face-in-source", [], "hard/neg_no_face.png", None, 2, ["source"]),
    ("no-face-in-target", [], None, "hard/neg_dogs.jpg", 2, ["target"]),
    (
        "reference-matches-nothing",
        ["--faces", "reference", "--reference-face", "REF/single/paul_rudd.jpg"],
        None,
        "group/insightface_t1.jpg",
        2,
        ["reference"],
    ),
    (
        "face-index-out-of-range",
        ["--faces", "index", "--face-index", "0", "--face-index", "40"],
        None,
        "single/biden2.jpg",
        2,
        ["40", "valid indices are 0"],
    ),
]


@pytest.mark.slow
@pytest.mark.parametrize(
    "args, source, target, code, fragments", [c[1:] for c in SLOW_ERRORS], ids=[c[0] for c in SLOW_ERRORS]
)
def test_swap_face_errors(tmp_path, faces_dir, args, source, target, code, fragments):
    out = tmp_path / "out.png"
    kwargs = {k: v for k, v in {"source": source, "target": target}.items() if v is not None}
    args = [a.replace("REF/", f"{faces_dir}/") for a in args]
    proc = faceweave(*swap_args(faces_dir, out, **kwargs), *args)
    assert_clean_error(proc, code, *fragments)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_swap_one_face(tmp_path, faces_dir):
    from PIL import Image

    out = tmp_path / "swapped.png"
    proc = faceweave(*swap_args(faces_dir, out))
    assert_no_noise(proc)
    assert proc.stderr == ""
    lines = proc.stdout.strip().splitlines()
    assert lines[0].startswith("face 0 [") and "biden2.jpg" in lines[0]
    assert lines[-1].startswith("wrote ")
    with Image.open(faces_dir / "single/astronaut_eileen_collins.png") as target, Image.open(out) as result:
        assert result.format == "PNG" and result.size == target.size
        result.load()


@pytest.mark.slow
def test_swap_keeps_the_target_alpha(tmp_path, faces_dir):
    import numpy as np
    from PIL import Image

    with Image.open(faces_dir / "single/astronaut_eileen_collins.png") as rgb:
        alpha = Image.linear_gradient("L").resize(rgb.size)
        rgba = rgb.convert("RGB")
        rgba.putalpha(alpha)
    target = tmp_path / "target_rgba.png"
    rgba.save(target)
    out = tmp_path / "out.webp"
    proc = faceweave("swap", "-s", faces_dir / "single/biden2.jpg", "-t", target, "-o", out, "--quality", "90")
    assert_no_noise(proc)
    with Image.open(out) as result:
        assert result.mode == "RGBA" and result.size == rgba.size
        assert np.abs(np.asarray(result.getchannel("A"), np.int16) - np.asarray(alpha, np.int16)).max() <= 1


@pytest.mark.slow
def test_swap_many_faces_json(tmp_path, faces_dir):
    out = tmp_path / "group.jpg"
    proc = faceweave(*swap_args(faces_dir, out, target="group/insightface_t1.jpg"), "--faces", "many", "--json")
    assert_no_noise(proc)
    report = json.loads(proc.stdout)
    assert report["faces_found"] >= 3
    assert len(report["swapped"]) == report["faces_found"]
    assert sorted(s["face"] for s in report["swapped"]) == list(range(report["faces_found"]))
    assert out.is_file() and Path(report["output"]) == out


@pytest.mark.slow
def test_faces_lists_faces_and_writes_debug_image(tmp_path, faces_dir):
    from PIL import Image

    debug = tmp_path / "x.png"
    proc = faceweave("faces", faces_dir / "group/insightface_t1.jpg", "--debug-image", debug, "--json")
    assert_no_noise(proc)
    listing = json.loads(proc.stdout)
    faces = listing["faces"]
    assert len(faces) >= 3
    assert [f["index"] for f in faces] == list(range(len(faces)))
    areas = [(f["box"][2] - f["box"][0]) * (f["box"][3] - f["box"][1]) for f in faces]
    assert areas == sorted(areas, reverse=True)  # default order: large-small (by box area)
    assert set(faces[0]) >= {"box", "size", "score", "yaw", "pitch", "roll"}
    with Image.open(debug) as drawn:
        assert drawn.size == (listing["width"], listing["height"])


@pytest.mark.slow
def test_video_output_for_a_photo_target_is_refused(tmp_path, faces_dir):
    out = tmp_path / "out.mp4"
    proc = faceweave("swap", "-s", faces_dir / "single/biden2.jpg", "-t", faces_dir / "single/biden2.jpg", "-o", out)
    assert_clean_error(proc, 2, "out.mp4", "target is a photo")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_video_output_for_an_audio_only_target_says_what_it_is(tmp_path, faces_dir):
    import av

    audio = tmp_path / "audio.m4a"
    with av.open(str(faces_dir / "video/lp_d18_talking_face.mp4")) as src, av.open(str(audio), "w") as dst:
        stream = dst.add_stream_from_template(src.streams.audio[0])
        for packet in src.demux(src.streams.audio[0]):
            if packet.dts is not None:
                packet.stream = stream
                dst.mux(packet)
    out = tmp_path / "out.mp4"
    proc = faceweave("swap", "-s", faces_dir / "single/biden2.jpg", "-t", audio, "-o", out)
    assert_clean_error(proc, 2, "no video stream")
    assert not out.exists()


def test_run_app_reports_an_abort_and_lets_an_exit_through():
    """click's Abort (Ctrl-C at a prompt) is "interrupted", and an exit a
    command raises itself (typer's after a broken pipe) is not a traceback
    from the exception matching."""
    import pytest
    import typer

    from faceweave.cli.console import EXIT_INTERRUPTED, run_app

    app = typer.Typer()

    @app.command()
    def main(stop: str = "abort") -> None:
        if stop == "abort":
            raise typer.Abort()
        raise SystemExit(3)

    assert run_app(app, []) == EXIT_INTERRUPTED
    with pytest.raises(SystemExit) as caught:
        run_app(app, ["--stop", "exit"])
    assert caught.value.code == 3
