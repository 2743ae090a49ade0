"""Bad input to every ``faceweave`` command, run as subprocesses.

Each row of :data:`CASES` is one misuse a user could make; the command must
exit with the expected code, print ONE ``error: ...`` line that names what
was wrong and what is accepted (no traceback, no native log noise), and
leave nothing (not even a temporary file) in the output folder.

Placeholders in the arguments: ``{F}`` the real photos, ``{B}`` the bad files
made by :func:`bad`, ``{O}`` the test's empty output folder, ``{ONNX}`` a
real ONNX model (nudenet's detector, installed with the package).
"""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tests.test_cli import assert_clean_error, faceweave

pytestmark = pytest.mark.slow

S = "{F}/single/biden2.jpg"
T = "{F}/single/astronaut_eileen_collins.png"
V = "{F}/video/lp_d18_talking_face.mp4"
ONNX_MODEL = Path(__import__("sysconfig").get_paths()["purelib"]) / "nudenet" / "320n.onnx"


@pytest.fixture(scope="module")
def bad(tmp_path_factory, faces_dir: Path) -> Path:
    """Empty, mislabelled and truncated files, cut from the real ones."""
    folder = tmp_path_factory.mktemp("bad")
    for name in ("text.jpg", "text.mp4", "text.onnx", "server.toml"):
        (folder / name).write_text("this is not what the name says\n")
    for name in ("empty.jpg", "empty.mp4", "empty.onnx"):
        (folder / name).write_bytes(b"")
    png = (faces_dir / "single/astronaut_eileen_collins.png").read_bytes()
    (folder / "truncated.png").write_bytes(png[: len(png) // 2])
    mp4 = (faces_dir / "video/lp_d18_talking_face.mp4").read_bytes()
    (folder / "truncated.mp4").write_bytes(mp4[:2000])
    onnx_bytes = ONNX_MODEL.read_bytes()
    (folder / "truncated.onnx").write_bytes(onnx_bytes[: len(onnx_bytes) // 2])
    (folder / "folder.mp4").mkdir()
    (folder / "noidentities").mkdir()
    (folder / "unknown_key.toml").write_text("[server]\nport = 8000\n")
    (folder / "wrong_type.json").write_text('{"port": "eighty"}')
    from PIL import Image

    Image.new("RGB", (320, 240), (128, 128, 128)).save(folder / "grey.png")  # a photo without a face
    return folder


# (case id, arguments, exit code, fragments the one-line message must hold)
CASES = [
    # swap: inputs
    ("swap-source-is-folder", ["swap", "-s", "{F}", "-t", T, "-o", "{O}/out.png"], 2, ["is a directory", "JPEG, PNG"]),
    ("swap-empty-target", ["swap", "-s", S, "-t", "{B}/empty.jpg", "-o", "{O}/out.png"], 2, ["empty (0 bytes)"]),
    (
        "swap-text-named-mp4",
        ["swap", "-s", S, "-t", "{B}/text.mp4", "-o", "{O}/out.mp4"],
        2,
        ["text.mp4", "accepted: MP4"],
    ),
    (
        "swap-truncated-png",
        ["swap", "-s", S, "-t", "{B}/truncated.png", "-o", "{O}/out.png"],
        2,
        ["truncated", "complete PNG"],
    ),
    (
        "swap-truncated-mp4",
        ["swap", "-s", S, "-t", "{B}/truncated.mp4", "-o", "{O}/out.mp4"],
        2,
        ["truncated", "video"],
    ),
    # swap: outputs
    ("swap-output-txt", ["swap", "-s", S, "-t", T, "-o", "{O}/out.txt"], 2, [".txt", ".png"]),
    (
        "swap-skin-tone-above-one",
        ["swap", "-s", S, "-t", T, "-o", "{O}/out.png", "--skin-tone", "1.5"],
        2,
        ["--skin-tone", "less than or equal to 1"],
    ),
    (
        "live-skin-tone-below-zero",
        ["live", V, "-s", S, "-o", "{O}/out.mp4", "--skin-tone", "-0.5"],
        2,
        ["--skin-tone", "greater than or equal to 0"],
    ),
    (
        "evaluate-skin-tone-above-one",
        ["evaluate", "{F}", "--out", "{O}/ev", "--skin-tone", "2"],
        2,
        ["--skin-tone", "less than or equal to 1"],
    ),
    (
        "swap-output-under-a-file",
        ["swap", "-s", S, "-t", T, "-o", "{B}/text.jpg/out.png"],
        1,
        ["text.jpg' is a file, not a folder"],
    ),
    (
        "swap-video-output-is-folder",
        ["swap", "-s", S, "-t", V, "-o", "{B}/folder.mp4"],
        2,
        ["existing folder", "file name"],
    ),
    # swap: options
    (
        "swap-nan-distance",
        ["swap", "-s", S, "-t", T, "-o", "{O}/out.png", "--reference-distance", "nan"],
        2,
        ["--reference-distance", "finite"],
    ),
    (
        "swap-zero-max-pixels",
        ["swap", "-s", S, "-t", T, "-o", "{O}/out.png", "--max-pixels", "0"],
        2,
        ["--max-pixels", "greater than or equal to 1"],
    ),
    (
        "swap-unknown-provider",
        ["swap", "-s", S, "-t", T, "-o", "{O}/out.png", "--execution-provider", "warp9"],
        2,
        ["--execution-provider", "'warp9'", "cpu, cuda"],
    ),
    (
        "swap-unknown-swapper",
        ["swap", "-s", S, "-t", T, "-o", "{O}/out.png", "--swapper", "nosuch"],
        2,
        ["--swapper", "'nosuch'", "mesh"],
    ),
    (
        "swap-bad-trim",
        ["swap", "-s", S, "-t", V, "-o", "{O}/out.mp4", "--trim", "20-5"],
        2,
        ["--trim", "END must be after START"],
    ),
    ("swap-infinite-fps", ["swap", "-s", S, "-t", V, "-o", "{O}/out.mp4", "--fps", "inf"], 2, ["--fps", "positive"]),
    # batch, people, evaluate, verify, faces
    (
        "batch-pattern-matches-nothing",
        ["batch", "-s", S, "-t", "{O}/*.jpg", "-o", "{O}/{name}.png"],
        2,
        ["matches no file"],
    ),
    ("batch-template-extension", ["batch", "-s", S, "-t", S, "-o", "{O}/{name}.txt"], 2, [".txt", ".png", ".mp4"]),
    ("people-on-a-photo", ["people", S], 2, ["is an image", "expected a video"]),
    ("people-infinite-every", ["people", V, "--every", "inf"], 2, ["--every", "finite"]),
    (
        "evaluate-no-identities",
        ["evaluate", "{B}/noidentities", "--out", "{O}/ev"],
        2,
        ["no identities.csv", "columns file,identity"],
    ),
    ("evaluate-out-is-a-file", ["evaluate", "{F}", "--out", "{B}/text.jpg"], 2, ["--out", "is a file"]),
    ("verify-a-folder", ["verify", "{F}"], 2, ["is a directory"]),
    ("verify-text-named-jpg", ["verify", "{B}/text.jpg"], 2, ["not an image or a video"]),
    ("faces-debug-image-txt", ["faces", S, "--debug-image", "{O}/d.txt"], 2, ["--debug-image", ".png"]),
    # models
    (
        "models-download-offline",
        ["models", "download", "inswapper_128", "--offline", "--models-dir", "{O}/m"],
        1,
        ["--offline", "models import"],
    ),
    (
        "models-unknown-name",
        ["models", "download", "nosuch", "--offline", "--models-dir", "{O}/m"],
        2,
        ["unknown model 'nosuch'", "models list"],
    ),
    (
        "models-import-truncated",
        ["models", "import", "inswapper_128", "{B}/truncated.onnx", "--models-dir", "{O}/m"],
        2,
        ["not an ONNX model"],
    ),
    ("models-dir-is-a-file", ["models", "list", "--models-dir", "{B}/text.jpg"], 2, ["--models-dir", "is a file"]),
    # export, benchmark-model
    ("export-text-named-onnx", ["export", "{B}/text.onnx", "-o", "{O}/x.onnx"], 2, ["not an ONNX model"]),
    ("export-folder-as-model", ["export", "{F}", "-o", "{O}/x.onnx"], 2, ["is a folder", ".onnx"]),
    (
        "export-shape-nonsense",
        ["export", "{ONNX}", "-o", "{O}/x.onnx", "--shape", "nonsense"],
        2,
        ["--shape", "NAME=D1,D2"],
    ),
    (
        "export-shape-negative",
        ["export", "{ONNX}", "-o", "{O}/x.onnx", "--shape", "images=1,3,-320,320"],
        2,
        ["positive"],
    ),
    (
        "export-opset-out-of-range",
        ["export", "{ONNX}", "-o", "{O}/x.onnx", "--opset", "999"],
        2,
        ["--opset 999", "from 7 to"],
    ),
    ("export-output-not-onnx", ["export", "{ONNX}", "-o", "{O}/x.txt"], 2, [".onnx"]),
    ("bench-batch-list-nonsense", ["benchmark-model", "{ONNX}", "--batch", "0,-1,x"], 2, ["--batch", "1,2,4,8"]),
    ("bench-batch-huge", ["benchmark-model", "{ONNX}", "--batch", "100000000"], 2, ["--batch 100000000", "GiB"]),
    # benchmark
    ("benchmark-unknown-resolution", ["benchmark", "-s", S, "--resolutions", "4k"], 2, ["'4k'", "240p", "all"]),
    ("benchmark-source-is-text", ["benchmark", "-s", "{B}/text.jpg", "--frames", "4"], 2, ["text.jpg", "JPEG, PNG"]),
    (
        "benchmark-picture-without-face",
        ["benchmark", "-s", S, "-t", "{B}/grey.png", "--resolutions", "240p", "--frames", "4", "--cycles", "1"],
        2,
        ["no face was swapped", "240p"],
    ),
    ("bench-negative-warmup", ["benchmark-model", "{ONNX}", "--warmup", "-1"], 2, ["--warmup", "0 or more"]),
    (
        "bench-unknown-provider",
        ["benchmark-model", "{ONNX}", "--execution-provider", "warp9"],
        2,
        ["'warp9'", "cpu, cuda"],
    ),
    # serve, worker (they must fail before serving / consuming)
    (
        "serve-config-not-toml",
        ["serve", "--config", "{B}/server.toml", "--storage", "{O}/st"],
        2,
        ["not valid", "server.toml"],
    ),
    (
        "serve-config-unknown-key",
        ["serve", "--config", "{B}/unknown_key.toml", "--storage", "{O}/st"],
        2,
        ["unknown setting server", "known settings", "port"],
    ),
    (
        "serve-config-wrong-type",
        ["serve", "--config", "{B}/wrong_type.json", "--storage", "{O}/st"],
        2,
        ["setting port", "integer"],
    ),
    (
        "serve-bad-log-level",
        ["serve", "--log-level", "loud", "--storage", "{O}/st", "--port", "0"],
        2,
        ["--log-level", "debug"],
    ),
    ("serve-storage-is-a-file", ["serve", "--storage", "{B}/text.jpg", "--port", "0"], 2, ["--storage", "is a file"]),
    (
        "serve-unknown-database",
        ["serve", "--database", "nosuch://x", "--storage", "{O}/st", "--port", "0"],
        2,
        ["--database", "sqlite:///"],
    ),
    ("worker-without-broker", ["worker", "--storage", "{O}/st"], 2, ["needs a broker", "redis://"]),
    (
        "worker-unknown-broker-kind",
        ["worker", "--broker", "nosuch://x", "--storage", "{O}/st"],
        2,
        ["--broker", "redis://"],
    ),
    (
        "worker-unreachable-broker",
        ["worker", "--broker", "redis://127.0.0.1:1/0", "--storage", "{O}/st"],
        1,
        ["cannot reach the broker", "127.0.0.1:1"],
    ),
    # the device asked for is checked before anything else (CANN: no build of onnxruntime here has it)
    (
        "worker-missing-device",
        ["worker", "--broker", "redis://127.0.0.1:1/0", "--storage", "{O}/st", "--execution-provider", "cann"],
        1,
        ["execution provider 'cann'", "not available", "--provider-fallback"],
    ),
]


def _expand(args: list[str], *, faces_dir: Path, bad: Path, out: Path) -> list[str]:
    values = {"{F}": faces_dir, "{B}": bad, "{O}": out, "{ONNX}": ONNX_MODEL}
    expanded = []
    for arg in args:
        for key, value in values.items():
            arg = arg.replace(key, str(value))
        expanded.append(arg)
    return expanded


@pytest.mark.parametrize("args, code, fragments", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_is_one_clean_line(tmp_path, faces_dir, bad, args, code, fragments):
    out = tmp_path / "out"
    out.mkdir()
    proc = faceweave(*_expand(args, faces_dir=faces_dir, bad=bad, out=out), cwd=out)
    assert_clean_error(proc, code, *fragments)
    assert sorted(p.name for p in out.rglob("*")) == []  # no result, no temporary file


def test_serve_on_a_port_in_use(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = faceweave("serve", "--port", port, "--storage", tmp_path / "st", cwd=tmp_path)
    assert_clean_error(proc, 2, f"--port {port}", "already in use")
    assert list(tmp_path.iterdir()) == []


# usage errors that typer finds before a command runs; `run_app` makes them one line
USAGE = [
    (
        "quality-zero",
        ["swap", "-s", "a.jpg", "-t", "b.jpg", "-o", "c.png", "--quality", "0"],
        ["--quality", "faceweave swap --help"],
    ),
    (
        "nan-working-size",
        ["swap", "-s", "a.jpg", "-t", "b.jpg", "-o", "c.png", "--working-size", "nan"],
        ["--working-size", "integer"],
    ),
    (
        "unknown-option",
        ["swap", "-s", "a.jpg", "-t", "b.jpg", "-o", "c.png", "--no-such-option"],
        ["no such option", "--no-such-option"],
    ),
    (
        "skin-tone-not-a-number",
        ["swap", "-s", "a.jpg", "-t", "b.jpg", "-o", "c.png", "--skin-tone", "natural"],
        ["--skin-tone", "valid number"],
    ),
    ("unknown-command", ["swop"], ["no such command 'swop'", "faceweave --help"]),
    ("missing-output", ["swap", "-s", "a.jpg", "-t", "b.jpg"], ["missing option '--output'"]),
    ("negative-workers", ["serve", "--workers", "-1"], ["--workers", "greater than or equal to 0"]),
]
RUN_APP = (
    "import sys; from faceweave.cli import build_app; from faceweave.cli.console import run_app; "
    "sys.exit(run_app(build_app(), sys.argv[1:]))"
)


@pytest.mark.parametrize("args, fragments", [c[1:] for c in USAGE], ids=[c[0] for c in USAGE])
def test_usage_errors_are_one_line(tmp_path, args, fragments):
    proc = subprocess.run(
        [sys.executable, "-c", RUN_APP, *args], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert_clean_error(proc, 2, *fragments)
    assert list(tmp_path.iterdir()) == []


def test_the_entry_point_reports_usage_errors_in_one_line(tmp_path):
    proc = faceweave("swap", "-s", "a.jpg", "-t", "b.jpg", "-o", "c.png", "--quality", "0", cwd=tmp_path)
    assert_clean_error(proc, 2, "--quality")


def test_help_without_arguments_still_prints_help(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-c", RUN_APP, "swap"], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert proc.returncode == 2 and "--target" in proc.stdout and "Traceback" not in proc.stderr


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_during_a_video_swap_leaves_nothing(tmp_path, faces_dir):
    out = tmp_path / "out"
    out.mkdir()
    cmd = [
        sys.executable,
        "-m",
        "faceweave.cli",
        "swap",
        "-s",
        faces_dir / "single/biden2.jpg",
        "-t",
        faces_dir / "video/lp_d18_talking_face.mp4",
        "-o",
        out / "swapped.mp4",
        "--no-audio",
    ]
    # a shell starts background jobs with SIGINT ignored, and a child keeps
    # that: give the swap the default Ctrl-C whatever the test runs under
    proc = subprocess.Popen(
        list(map(str, cmd)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        preexec_fn=_default_sigint,
    )
    try:
        deadline = time.monotonic() + 60
        while not any(out.iterdir()) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)  # wait until the writer has created its temporary file
        assert proc.poll() is None, proc.communicate()
        assert any(out.iterdir()), "the swap never started writing"
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    # 130, or (now and then, when the interpreter's own shutdown meets the
    # interrupt again) death by SIGINT, which a shell also reports as 130
    assert proc.returncode in (130, -signal.SIGINT), (proc.returncode, stderr)
    assert "Traceback" not in stderr and stderr.strip().splitlines()[-1] == "interrupted", stderr
    assert sorted(p.name for p in out.iterdir()) == []


def test_serve_refuses_a_missing_device_for_its_embedded_workers(tmp_path):
    """Asked (in the settings) for an accelerator this machine lacks, ``serve``
    says so in one line and exits before listening."""
    import os

    env = {**os.environ, "FACEWEAVE_RUNTIME__EXECUTION_PROVIDER": "cann"}
    args = [sys.executable, "-m", "faceweave.cli", "serve", "--storage", str(tmp_path / "st"), "--port", "0"]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=120, env=env)
    assert_clean_error(proc, 1, "execution provider 'cann'", "not available")


#: the command line with the distributed extra's modules made unimportable
#: (as in an install without ``faceweave[distributed]``)
WITHOUT_DISTRIBUTED = (
    "import sys\n"
    "for name in ('celery', 'kombu', 'redis'):\n"
    "    sys.modules[name] = None\n"
    "from faceweave.cli import build_app; from faceweave.cli.console import run_app\n"
    "sys.exit(run_app(build_app(), sys.argv[1:]))"
)


@pytest.mark.parametrize("command", ["worker", "serve"])
def test_distributed_mode_without_its_extra_names_the_extra(tmp_path, command):
    args = [command, "--broker", "redis://127.0.0.1:1/0", "--storage", str(tmp_path / "st")]
    args += ["--database", f"sqlite:///{tmp_path / 'jobs.db'}"] + (["--port", "0"] if command == "serve" else [])
    proc = subprocess.run(
        [sys.executable, "-c", WITHOUT_DISTRIBUTED, *args], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert_clean_error(proc, 2, "needs the distributed extra", "celery", "pip install 'faceweave[distributed]'")
    assert not (tmp_path / "st").exists()
