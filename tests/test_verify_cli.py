"""``faceweave swap`` marks its outputs and logs the run; ``faceweave verify``
finds the marks.  Both run as subprocesses so that exit codes and stderr are
exactly what a user sees.  ``verify`` runs from a small typer app of its own
until it is registered in ``build_app``."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

NOISE = ("Traceback", "WARNING:", "INFO:", "absl", "W0000", "I0000", "E0000")
TIMEOUT_S = 300
VERIFY_APP = (
    "import sys, typer\n"
    "from faceweave.cli.verify import verify_command\n"
    "app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)\n"
    "app.callback()(lambda: None)\n"
    "app.command('verify')(verify_command)\n"
    "app(args=sys.argv[1:], prog_name='faceweave')\n"
)
HAS_NUDENET = importlib.util.find_spec("nudenet") is not None


def run(args: list, env_state: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "XDG_STATE_HOME": str(env_state)}
    return subprocess.run([sys.executable, *map(str, args)], capture_output=True, text=True, timeout=TIMEOUT_S, env=env)


def faceweave(*args, state: Path) -> subprocess.CompletedProcess:
    return run(["-m", "faceweave.cli", *args], state)


def verify(*args, state: Path) -> subprocess.CompletedProcess:
    return run(["-c", VERIFY_APP, "verify", *args], state)


def assert_one_error_line(proc: subprocess.CompletedProcess, code: int, *fragments: str) -> None:
    assert proc.returncode == code, f"exit {proc.returncode}\nstdout: {proc.stdout}\nstderr: {proc.stderr}"
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    assert not any(n in proc.stderr for n in NOISE) and proc.stdout == ""
    for fragment in fragments:
        assert fragment in lines[0]


@pytest.fixture(scope="module")
def swapped(tmp_path_factory, faces_dir):
    """One marked swap (screened when nudenet is installed) and one with --no-watermark."""
    folder = tmp_path_factory.mktemp("swap")
    state = folder / "state"
    base = ["swap", "-s", faces_dir / "single/biden2.jpg", "-t", faces_dir / "single/astronaut_eileen_collins.png"]
    marked = faceweave(
        *base, "-o", folder / "marked.png", "--screening", "refuse" if HAS_NUDENET else "off", state=state
    )
    plain = faceweave(
        *base, "-o", folder / "plain.jpg", "--no-watermark", "--audit-log", folder / "custom.jsonl", state=state
    )
    for proc in (marked, plain):
        assert proc.returncode == 0, proc.stderr
        assert not any(n in proc.stderr + proc.stdout for n in NOISE)
    return folder


@pytest.mark.slow
def test_swap_output_carries_label_and_watermark(swapped):
    proc = verify(swapped / "marked.png", "--json", state=swapped / "state")
    assert proc.returncode == 0, proc.stderr
    found = json.loads(proc.stdout)
    assert found["marked"] and found["label"]["ai_generated"] and found["label"]["tool"] == "faceweave"
    assert found["watermark"]["found"] and found["watermark"]["payload"]["tool_id"] == "0xFACE"
    # the label, the watermark and the audit line name the same run
    (line,) = (swapped / "state/faceweave/audit.jsonl").read_text().splitlines()
    audit = json.loads(line)
    assert found["label"]["run_id"] == found["watermark"]["payload"]["run_id"] == audit["run_id"]
    assert audit["watermark"]["run_id"] == audit["run_id"] and audit["outcome"] == "ok"
    assert audit["command"] == "swap" and audit["output"].endswith("marked.png")
    assert [i["role"] for i in audit["inputs"]] == ["source", "target"]
    assert all(len(i["sha256"]) == 64 for i in audit["inputs"])
    assert audit["options"]["no_watermark"] is False and audit["options"]["swap"]["selection"]["mode"] == "one"
    if HAS_NUDENET:
        assert audit["screening"]["policy"]["action"] == "refuse" and audit["screening"]["screened"] == []


@pytest.mark.slow
def test_no_watermark_output_has_the_label_only_and_the_audit_says_so(swapped):
    proc = verify(swapped / "plain.jpg", state=swapped / "state")
    assert proc.returncode == 0, proc.stderr  # still marked: by its label
    lines = proc.stdout.splitlines()
    assert lines[0].endswith(": marked") and lines[1].startswith("label: trainedAlgorithmicMedia (AI-generated)")
    assert lines[2].startswith("watermark: not found")
    (line,) = (swapped / "custom.jsonl").read_text().splitlines()
    audit = json.loads(line)
    assert audit["watermark"] == "disabled by --no-watermark" and audit["options"]["no_watermark"] is True


def test_unmarked_photo_exits_1(tmp_path, faces_dir):
    proc = verify(faces_dir / "single/biden2.jpg", state=tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout.splitlines()[0].endswith(": not marked") and proc.stderr == ""


@pytest.mark.parametrize(
    "name, content, fragment",
    [
        ("notes.txt", b"hello, this is text\n", "not an image or a video"),
        ("cut.png", "truncated", "truncated"),
        ("empty.png", b"", "empty"),
        ("missing.png", None, "does not exist"),
    ],
)
def test_bad_files_exit_2_with_one_line(tmp_path, faces_dir, name, content, fragment):
    path = tmp_path / name
    if content == "truncated":
        data = (faces_dir / "single/astronaut_eileen_collins.png").read_bytes()
        content = data[: len(data) // 3]
    if content is not None:
        path.write_bytes(content)
    assert_one_error_line(verify(path, state=tmp_path), 2, fragment)


def test_failed_swap_is_audited(tmp_path, faces_dir):
    state = tmp_path / "state"
    proc = faceweave(
        "swap",
        "-s",
        faces_dir / "single/biden2.jpg",
        "-t",
        faces_dir / "hard/neg_no_face.png",
        "-o",
        tmp_path / "o.png",
        state=state,
    )
    assert proc.returncode == 2
    (line,) = (state / "faceweave/audit.jsonl").read_text().splitlines()
    audit = json.loads(line)
    assert (audit["outcome"], audit["code"]) == ("error", "no_face") and "no face" in audit["message"]
    assert not (tmp_path / "o.png").exists()


def test_bad_screening_policy_fails_before_work(tmp_path, faces_dir):
    args = [
        "swap",
        "-s",
        faces_dir / "single/biden2.jpg",
        "-t",
        faces_dir / "single/biden2.jpg",
        "-o",
        tmp_path / "o.png",
    ]
    assert_one_error_line(faceweave(*args, "--screening", "maybe", state=tmp_path), 2, "--screening")


@pytest.mark.slow
def test_video_swap_is_marked_in_its_frames_and_tags(tmp_path, faces_dir):
    state = tmp_path / "state"
    out = tmp_path / "out.mp4"
    proc = faceweave(
        "swap",
        "-s",
        faces_dir / "single/biden2.jpg",
        "-t",
        faces_dir / "video/lp_d18_talking_face.mp4",
        "-o",
        out,
        "--trim",
        "0-0.5",
        "--no-audio",
        state=state,
    )
    assert proc.returncode == 0, proc.stderr
    found = json.loads(verify(out, "--json", "--frames", "4", state=state).stdout)
    assert found["kind"] == "video" and found["label"]["ai_generated"]
    assert found["watermark"]["found"] and found["watermark"]["frames_checked"] == 4
    assert found["watermark"]["frames_agreeing"] >= 3


@pytest.mark.slow
def test_swap_output_carries_a_c2pa_manifest_when_the_extra_is_installed(swapped):
    from faceweave.provenance import c2pa_manifest

    if not c2pa_manifest.available():
        pytest.skip("c2pa-python is not installed (pip install 'faceweave[c2pa]')")
    manifest = c2pa_manifest.read_manifest(swapped / "marked.png")
    assert manifest is not None
    assert "trainedAlgorithmicMedia" in json.dumps(manifest)
    # signing kept the XMP label and the watermark
    proc = verify(swapped / "marked.png", "--json", state=swapped / "state")
    assert proc.returncode == 0 and json.loads(proc.stdout)["watermark"]["found"]
