"""``faceweave batch`` and the planning functions behind it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from faceweave.batch import expand_targets, plan_batch
from faceweave.errors import InvalidOptionError


@pytest.mark.parametrize(
    "template, names, expected",
    [
        ("out/{name}_x.jpg", ["a.png", "b.png"], ["out/a_x.jpg", "out/b_x.jpg"]),
        ("out/{index}-{source_name}.png", ["a.png", "b.png"], ["out/0-me.png", "out/1-me.png"]),
        ("single.png", ["a.png"], ["single.png"]),
        ("same.png", ["a.png", "b.png"], InvalidOptionError),
        ("out/{nam}.png", ["a.png"], InvalidOptionError),
        ("{name}.png", ["x/a.png", "y/a.png"], InvalidOptionError),  # both would write a.png
    ],
)
def test_plan_batch(template, names, expected):
    targets = [Path(n) for n in names]
    if isinstance(expected, type):
        with pytest.raises(expected):
            plan_batch(targets, template, source_name="me")
    else:
        assert [str(i.output) for i in plan_batch(targets, template, source_name="me")] == expected


def test_expand_targets(tmp_path):
    (tmp_path / "a").mkdir()
    for name in ("a/1.png", "a/2.jpg", "3.png"):
        (tmp_path / name).write_bytes(b"x")
    assert [p.name for p in expand_targets([str(tmp_path / "**/*.png")])] == ["3.png", "1.png"] or [
        p.name for p in expand_targets([str(tmp_path / "**/*.png")])
    ] == ["1.png", "3.png"]
    assert len(expand_targets([str(tmp_path / "a/*"), str(tmp_path / "a/1.png")])) == 2  # each file once
    with pytest.raises(InvalidOptionError, match="matches no file"):
        expand_targets([str(tmp_path / "*.gif")])


@pytest.mark.slow
def test_batch_command_continues_past_bad_files(tmp_path, faces_dir):
    from tests.test_cli import NOISE, faceweave

    inputs = tmp_path / "in"
    inputs.mkdir()
    shutil.copy(faces_dir / "single/happy_man.png", inputs / "happy.png")
    shutil.copy(faces_dir / "hard/neg_dogs.jpg", inputs / "dogs.png")
    (inputs / "broken.png").write_text("not an image")
    out = tmp_path / "out"
    proc = faceweave(
        "batch",
        "-s",
        faces_dir / "single/biden2.jpg",
        "-t",
        str(inputs / "*.png"),
        "-o",
        str(out / "{name}.jpg"),
        "--json",
    )
    assert proc.returncode == 1, proc.stderr  # some failed
    assert "Traceback" not in proc.stderr and not any(noise in proc.stderr for noise in NOISE)
    results = {Path(r["target"]).name: r for r in json.loads(proc.stdout)}
    assert results["happy.png"]["ok"] and (out / "happy.jpg").is_file()
    assert not results["dogs.png"]["ok"] and "no face" in results["dogs.png"]["message"]
    assert not results["broken.png"]["ok"] and "not an accepted image" in results["broken.png"]["message"]
    assert sorted(p.name for p in out.iterdir()) == ["happy.jpg"]
